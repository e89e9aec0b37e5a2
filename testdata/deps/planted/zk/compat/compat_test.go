package compat

import (
	"testing"

	"coord/client"
	"coord/server"
)

// coord/server is allowed here; coord/client is planted.
func TestCompat(t *testing.T) { _, _ = server.Run, client.Conn{} }
