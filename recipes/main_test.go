package recipes_test

import (
	"os"
	"testing"
	"time"

	"coord/internal/watchdog"
)

func TestMain(m *testing.M) {
	code := watchdog.Run(m, 4*time.Minute)
	shared.stop()
	os.Exit(code)
}
