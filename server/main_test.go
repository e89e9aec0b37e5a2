package server

import (
	"flag"
	"os"
	"testing"
	"time"
)

// TestMain runs up to 8 parallel tests at once (2 under the race
// detector) unless -parallel says otherwise: the tests on the in-memory
// cluster (t.Parallel) wait on timers (elections, session timeouts, the
// read-only grace), not on the CPU; 38 of them took 29 s one after another
// using 4.4 s of CPU. The race detector multiplies their CPU several
// times: more at once on a 2-core machine and their timings no longer
// hold.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", map[bool]string{false: "8", true: "2"}[raceDetector])
	}
	os.Exit(RunWithWatchdog(m, 5*time.Minute))
}
