package compat

import (
	"os"
	"testing"
	"time"

	"coord/server"
)

func TestMain(m *testing.M) {
	code := server.RunWithWatchdog(m, 5*time.Minute)
	removeCoordBinary() // built by coordBinary for the tests that run coord processes
	os.Exit(code)
}
