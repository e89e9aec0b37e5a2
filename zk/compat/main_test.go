package compat

import (
	"os"
	"testing"
	"time"

	"coord/internal/watchdog"
)

func TestMain(m *testing.M) {
	code := watchdog.Run(m, 5*time.Minute)
	removeCoordBinary() // built by coordBinary for the tests that run coord processes
	os.Exit(code)
}
