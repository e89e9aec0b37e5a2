// Not planted: client's tests may start an in-process server.
package client_test

import (
	"testing"

	"coord/client"
	"coord/server"
)

func TestC(t *testing.T) { _, _ = client.Conn{}, server.Run }
