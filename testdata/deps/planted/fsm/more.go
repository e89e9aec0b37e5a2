// Planted: every other import a pure package may not use.
package fsm

import (
	"crypto/rand"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"os/exec"
	"syscall"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)
