package recipes_test

import (
	"os"
	"testing"
	"time"

	"coord/server"
)

func TestMain(m *testing.M) {
	code := server.RunWithWatchdog(m, 4*time.Minute)
	shared.stop()
	os.Exit(code)
}
