package watchdog_test

import (
	"strings"
	"testing"
	"time"

	"coord/internal/watchdog"
)

type fakeM struct {
	code int
	ran  bool
}

func (m *fakeM) Run() int { m.ran = true; return m.code }

// Run returns the tests' exit code when they end in time.
func TestRunReturnsTheCode(t *testing.T) {
	m := &fakeM{code: 7}
	if got := watchdog.Run(m, time.Minute); got != 7 || !m.ran {
		t.Fatalf("Run = %d (ran %v), want 7", got, m.ran)
	}
}

// The summary keeps the goroutines in coord's and raft's code, each with
// its frames there and their file:line, and drops the others.
func TestSummary(t *testing.T) {
	dump := `goroutine 1 [running]:
main.main()
	/usr/lib/go/src/main.go:1 +0x1

goroutine 7 [chan receive, 3 minutes]:
runtime.gopark(0x0)
	/usr/lib/go/src/runtime/proc.go:1 +0x1
coord/server.(*Server).Close(0xc0)
	/work/main/server/server.go:300 +0x2
coord/server.TestHang(0xc1)
	/work/main/server/hang_test.go:12 +0x3

goroutine 9 [select]:
github.com/hashicorp/raft.(*Raft).run(0xc2)
	/go/pkg/mod/github.com/hashicorp/raft@v1.7.0/raft.go:150 +0x4
`
	got := watchdog.Summary([]byte(dump), 5*time.Minute)
	want := `watchdog: tests still running after 5m0s; goroutines in coord and raft code:
goroutine 7 [chan receive, 3 minutes]:
  coord/server.(*Server).Close(0xc0)  /work/main/server/server.go:300 +0x2
  coord/server.TestHang(0xc1)  /work/main/server/hang_test.go:12 +0x3
goroutine 9 [select]:
  github.com/hashicorp/raft.(*Raft).run(0xc2)  /go/pkg/mod/github.com/hashicorp/raft@v1.7.0/raft.go:150 +0x4
`
	if got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(got, "main.main") {
		t.Error("the summary shows a goroutine outside coord and raft")
	}
}
