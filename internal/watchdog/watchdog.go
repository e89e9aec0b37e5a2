// Package watchdog bounds a test binary's run: a package's TestMain runs
// its tests through Run, and a hang then ends with the goroutines in
// coord's and raft's code, compactly, in the last lines of the output
// instead of in the middle of go test's full dump.
package watchdog

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Run runs a package's tests (m is the *testing.M of its TestMain) and
// returns their exit code. If they are still running after limit (times
// -count), it prints the goroutines that are in this module's code (the
// hung test's among them) and raft's, and exits the process with code 3.
// Fuzzing and benchmarks run as long as they are told to. It parses the
// command line (flag.Parse), as TestMain must before reading flags.
func Run(m interface{ Run() int }, limit time.Duration) int {
	flag.Parse()
	for _, name := range []string{"test.fuzz", "test.bench"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return m.Run()
		}
	}
	// -count=N runs every test N times: the limit is per run.
	if f := flag.Lookup("test.count"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 1 {
			limit *= time.Duration(n)
		}
	}
	t := time.AfterFunc(limit, func() {
		buf := make([]byte, 64<<20)
		buf = buf[:runtime.Stack(buf, true)]
		os.Stderr.WriteString(Summary(buf, limit))
		os.Exit(3)
	})
	defer t.Stop()
	return m.Run()
}

// Summary is what Run prints from dump (runtime.Stack of every goroutine):
// a heading, then each goroutine in coord's or hashicorp/raft's code as
// its first line and its frames in those packages, one line each with
// the frame's file:line. raft's own goroutines are shown too: a Shutdown
// that never returns waits on one of them.
func Summary(dump []byte, limit time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "watchdog: tests still running after %v; goroutines in coord and raft code:\n", limit)
	ours := func(l string) bool { return strings.Contains(l, "coord/") || strings.Contains(l, "hashicorp/raft") }
	for _, g := range strings.Split(string(dump), "\n\n") {
		if !ours(g) {
			continue
		}
		lines := strings.Split(g, "\n")
		b.WriteString(lines[0] + "\n")
		for i, l := range lines[1:] {
			if !strings.HasPrefix(l, "\t") && ours(l) {
				b.WriteString("  " + strings.TrimSpace(l))
				if i+2 < len(lines) { // the frame's file:line
					b.WriteString("  " + strings.TrimSpace(lines[i+2]))
				}
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}
