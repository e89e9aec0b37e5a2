// Skipped by the checker, as by the go tool: it is under testdata.
package skipped

import (
	"net"

	"coord/server"
)

var _, _ = net.Dial, server.Run
