// Not planted: the server may use the network, the clock and every package
// below it.
package server

import (
	"net"
	"time"

	"coord/fsm"
	"coord/session"
	"coord/zxid"
)

func Run() {
	go func() { _ = time.Now(); _, _ = net.Listen("tcp", ":0") }()
	_, _, _ = fsm.FSM{}, session.SystemClock{}, zxid.Zxid(0)
}
