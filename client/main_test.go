package client

import (
	"os"
	"testing"
	"time"

	"coord/internal/watchdog"
)

func TestMain(m *testing.M) { os.Exit(watchdog.Run(m, 5*time.Minute)) }
