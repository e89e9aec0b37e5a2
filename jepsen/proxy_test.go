package jepsen

import (
	"context"
	"io"
	"net"
	"regexp"
	"runtime"
	"testing"
	"time"
)

// TestProxy drives the proxy with an echo server as target 1 and a client
// that comes from server 0's source address: it forwards, delays, drops one
// way, refuses across a partition, forwards strangers always, heals, and
// leaves no goroutine behind.
func TestProxy(t *testing.T) {
	before := runtime.NumGoroutine()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	p := NewProxy(1, testLog(t))
	addr, _, err := p.Target(1, echo.Addr().String(), echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	dial := func(src string) net.Conn {
		t.Helper()
		c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// echoes says whether msg comes back within d, and how soon.
	echoes := func(c net.Conn, d time.Duration) (bool, time.Duration) {
		t0 := time.Now()
		c.SetDeadline(t0.Add(d))
		if _, err := c.Write([]byte("ping")); err != nil {
			return false, 0
		}
		buf := make([]byte, 4)
		_, err := io.ReadFull(c, buf)
		return err == nil && string(buf) == "ping", time.Since(t0)
	}

	c := dial(proxySource(0))
	if ok, _ := echoes(c, 2*time.Second); !ok {
		t.Fatal("no echo through the open proxy")
	}
	p.Delay(0, []int{1}, 150*time.Millisecond)
	if ok, d := echoes(c, 2*time.Second); !ok || d < 150*time.Millisecond {
		t.Errorf("delayed echo: ok %v after %v, want ok after >= 150ms", ok, d)
	}
	p.Heal()
	p.Cut(0, 1)
	if ok, _ := echoes(c, 300*time.Millisecond); ok {
		t.Errorf("echo came back across a cut link")
	}
	if n := p.Counts()[[2]int{0, 1}]; n.Dropped != 4 || n.Refused != 0 {
		t.Errorf("one-way cut counted %+v, want 4 bytes dropped", n)
	}
	p.Heal() // closes the connection that lost bytes
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("a connection that lost bytes is still open after Heal")
	}
	c = dial(proxySource(0))
	stranger := dial("127.0.0.1")
	if ok, _ := echoes(c, 2*time.Second); !ok {
		t.Fatal("no echo after heal")
	}
	p.Partition([][]int{{0}, {1}})
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("an open connection across a partition is not closed")
	}
	c = dial(proxySource(0))
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("a new connection across a partition is not refused")
	}
	if ok, _ := echoes(stranger, 2*time.Second); !ok {
		t.Errorf("a connection from outside the cluster is cut by the partition")
	}
	if n := p.Counts()[[2]int{0, 1}]; n.Refused != 1 || n.Closed != 1 {
		t.Errorf("partition counted %+v, want 1 refused, 1 closed", n)
	}
	p.Heal()
	p.Loss(0, []int{1}, 1) // every chunk lost: stalls, then a reset
	c = dial(proxySource(0))
	if ok, _ := echoes(c, 5*time.Second); ok {
		t.Errorf("echo came back through a link that loses everything")
	}
	if n := p.Counts()[[2]int{0, 1}]; n.Stalled != 4 || n.Resets != 1 {
		t.Errorf("loss counted %+v, want 4 stalls and a reset", n)
	}

	p.Close()
	echo.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestProxyRun is a short run in proxy mode (as root too): the partition
// and latency nemeses go through the TCP proxy, and each must show that it
// took effect: an isolated leader or minority server stops serving, a
// one-way cut drops bytes, a slow link holds chunks back. Every checker
// must pass.
//
//	go test -v -run TestProxyRun ./jepsen/
func TestProxyRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for about 30 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Voters: 3, Duration: 20 * time.Second, Seed: 11, Net: "proxy",
		Nemeses:   []string{"partition-minority", "partition-leader", "partition-oneway", "latency"},
		Workloads: []string{"register", "sessions"},
		Workers:   3, Interval: 500 * time.Millisecond, Hold: time.Second,
		Dir: t.TempDir(), Log: testLog(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range rep.Notes {
		t.Logf("note: %s", n)
	}
	// The isolated server is named in the description; /health just before
	// the heal must show it not serving.
	isolated := func(desc string) bool {
		m := regexp.MustCompile(`partition (s\d) \|`).FindStringSubmatch(desc)
		return m != nil && regexp.MustCompile(m[1]+` (follower|candidate) \(not serving\)`).MatchString(desc) &&
			regexp.MustCompile(`healed: proxy: .*`+m[1]+`->s\d (refused [1-9]|closed [1-9])`).MatchString(desc)
	}
	evidence := map[string]func(string) bool{
		"partition-minority": isolated,
		"partition-leader":   isolated,
		"partition-oneway":   regexp.MustCompile(`healed: proxy: .*s\d->s\d dropped B [1-9]`).MatchString,
		"latency":            regexp.MustCompile(`delayed \d+ms; healed: proxy: .*s\d->s\d delayed [1-9]`).MatchString,
	}
	seen := map[string]bool{}
	for _, f := range rep.Faults {
		t.Logf("fault %s: %s (err %q)", f.Nemesis, f.Desc, f.Err)
		if f.Err != "" {
			t.Errorf("fault %s: %s", f.Nemesis, f.Err)
			continue
		}
		if ev := evidence[f.Nemesis]; ev != nil && ev(f.Desc) {
			seen[f.Nemesis] = true
		}
	}
	for n := range evidence {
		if !seen[n] {
			t.Errorf("no %s fault shows that it took effect", n)
		}
	}
	for _, v := range rep.Verdicts {
		t.Logf("%s: %s: %s %v", v.Checker, v.Result, v.Summary, v.Details)
		if v.Result != Pass {
			t.Errorf("checker %s: %s", v.Checker, v.Result)
		}
	}
	if len(rep.Verdicts) == 0 {
		t.Errorf("no verdicts")
	}
}
