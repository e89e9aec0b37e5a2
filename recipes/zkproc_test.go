package recipes_test

import (
	"context"
	"os"
	"time"

	"coord/internal/zkproc"
)

// Apache ZooKeeper from Debian's zookeeper package, started as real JVMs on
// loopback (internal/zkproc).

// zkMissing says why ZooKeeper cannot run here, or "".
func zkMissing() string {
	if os.Getenv("COORD_RECIPES_SKIP_ZOOKEEPER") != "" {
		return "ZooKeeper runs skipped: COORD_RECIPES_SKIP_ZOOKEEPER is set"
	}
	if err := zkproc.Check(); err != nil {
		return "ZooKeeper runs: " + err.Error()
	}
	return ""
}

// tb is what the process helpers need of a test (or of TestMain's mainTB).
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// newZKCluster starts n ZooKeeper servers (tick 100 ms, session timeouts in
// [200 ms, 20 s], as coord's test configuration) and waits until each
// serves; they are killed when the test ends.
func newZKCluster(t tb, n int) *zkproc.Ensemble {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e, err := zkproc.Start(ctx, zkproc.Options{Dir: t.TempDir(), Servers: n,
		Config: "tickTime=100\ninitLimit=100\nsyncLimit=50\nminSessionTimeout=200\nmaxSessionTimeout=20000"})
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(e.Close)
	return e
}
