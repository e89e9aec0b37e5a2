// Planted: the vocabulary is a leaf and pure.
package vocab

import (
	"os"
	"time"

	"coord/zxid"
)

type Code int32

var _, _, _ = os.Getpid, time.Duration(0), zxid.Zxid(0)
