package server

import (
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(RunWithWatchdog(m, 5*time.Minute)) }
