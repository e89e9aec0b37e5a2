package client

import (
	"os"
	"testing"
	"time"

	"coord/server"
)

func TestMain(m *testing.M) { os.Exit(server.RunWithWatchdog(m, 5*time.Minute)) }
