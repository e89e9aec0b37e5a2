// Planted: fsm imports the network, an upward coord package and time, reads
// the clock and starts a goroutine.
package fsm

import (
	"net"
	"time"

	"coord/server"
	"coord/zxid"
)

var _ = zxid.Zxid(0)

func Apply() {
	_ = time.Now()
	go server.Run()
	_, _ = net.Dial("tcp", "x:1")
}
