// Test files may use rand, the clock, goroutines and the network; they may
// not import upward (coord/client is planted).
package fsm

import (
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"coord/client"
)

func TestX(t *testing.T) {
	go func() { _ = time.Now(); _ = rand.IntN(2); _, _ = net.Dial("tcp", "x:1") }()
	_ = client.Conn{}
}
