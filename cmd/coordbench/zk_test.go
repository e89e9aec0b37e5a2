package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"coord/vocab"
)

// ZooKeeper 3.8.0's answers, as Debian's package prints them.
const (
	srvrLeader = `Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC
Latency min/avg/max: 0/0.1234/12
Received: 1234
Sent: 1233
Connections: 3
Outstanding: 0
Zxid: 0x2000004d2
Mode: leader
Node count: 1021
Proposal sizes last/min/max: 48/48/170
`
	srvrStandalone = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nReceived: 1\nSent: 0\nConnections: 1\nOutstanding: 0\nZxid: 0x0\nMode: standalone\nNode count: 5\n"
	srvrNotServing = "This ZooKeeper instance is not currently serving requests\n"
)

func TestParseSrvr(t *testing.T) {
	s, err := parseSrvr(srvrLeader)
	if err != nil {
		t.Fatal(err)
	}
	if s.Mode != "leader" || s.Zxid != 0x2000004d2 || s.Nodes != 1021 {
		t.Errorf("leader: %+v", s)
	}
	s, err = parseSrvr(srvrStandalone)
	if err != nil || s.Mode != "standalone" || s.Zxid != 0 || s.Nodes != 5 {
		t.Errorf("standalone: %+v %v", s, err)
	}
	for _, bad := range []string{srvrNotServing, "", "Mode: follower\n", "Zxid: 0xzz\nMode: follower\n", "Zxid: 0x1\nMode: follower\nNode count: x\n"} {
		if _, err := parseSrvr(bad); err == nil {
			t.Errorf("parseSrvr(%q): no error", bad)
		}
	}
}

func TestParseMntr(t *testing.T) {
	m := parseMntr("zk_version\t3.8.0-x, built on 2024\nzk_server_state\tfollower\nzk_znode_count\t1021\nzk_global_sessions\t7\nnot a metric\nzk_watch_count\t 64 \n")
	want := map[string]string{"zk_version": "3.8.0-x, built on 2024", "zk_server_state": "follower", "zk_znode_count": "1021",
		"zk_global_sessions": "7", "zk_watch_count": "64"}
	if len(m) != len(want) {
		t.Errorf("got %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
	if len(parseMntr("This ZooKeeper instance is not currently serving requests\n")) != 0 {
		t.Error("not serving: want no metrics")
	}
}

func TestZKConfig(t *testing.T) {
	cfg := zkConfig(2, 3, 0, 5000, "/tmp/x/zk2")
	for _, line := range []string{"tickTime=2000", "initLimit=10", "syncLimit=5", "dataDir=/tmp/x/zk2",
		"clientPort=5402", "clientPortAddress=127.0.0.1", "4lw.commands.whitelist=*", "admin.enableServer=false",
		"server.1=127.0.0.1:5001:5101", "server.2=127.0.0.1:5002:5102", "server.3=127.0.0.1:5003:5103"} {
		if !slices.Contains(strings.Split(cfg, "\n"), line) {
			t.Errorf("zoo.cfg lacks %q:\n%s", line, cfg)
		}
	}
	if strings.Contains(cfg, "server.4") || strings.Contains(cfg, "snapCount") || strings.Contains(cfg, "forceSync") ||
		strings.Contains(cfg, "observer") {
		t.Errorf("zoo.cfg: unexpected settings:\n%s", cfg)
	}
	// With an observer: every server lists it as one, and only it says so
	// of itself.
	voter, observer := zkConfig(2, 3, 1, 5000, "/tmp/x/zk2"), zkConfig(4, 3, 1, 5000, "/tmp/x/zk4")
	for _, cfg := range []string{voter, observer} {
		if !slices.Contains(strings.Split(cfg, "\n"), "server.4=127.0.0.1:5004:5104:observer") ||
			!slices.Contains(strings.Split(cfg, "\n"), "server.3=127.0.0.1:5003:5103") {
			t.Errorf("zoo.cfg lacks the observer's or a voter's line:\n%s", cfg)
		}
	}
	if strings.Contains(voter, "peerType") || !slices.Contains(strings.Split(observer, "\n"), "peerType=observer") {
		t.Errorf("peerType=observer belongs in the observer's zoo.cfg only:\nvoter:\n%s\nobserver:\n%s", voter, observer)
	}
}

func TestRotate(t *testing.T) {
	s := []string{"a", "b", "c"}
	for i, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if got := rotate(s, i); !slices.Equal(got, want) {
			t.Errorf("rotate(%d) = %v, want %v", i, got, want)
		}
	}
}

func TestOrderedHosts(t *testing.T) {
	h := &orderedHosts{order: []string{"b:1", "c:1", "a:1"}, retryPause: 30 * time.Millisecond}
	if err := h.Init([]string{"a:1", "c:1", "b:1"}); err != nil { // go-zookeeper's shuffled list: ignored
		t.Fatal(err)
	}
	if h.Len() != 3 {
		t.Errorf("Len %d", h.Len())
	}
	next := func() (string, time.Duration) {
		t0 := time.Now()
		s, retry := h.Next()
		if retry {
			t.Fatalf("Next said retryStart: go-zookeeper would fail queued requests and sleep 1 s")
		}
		return s, time.Since(t0)
	}
	for _, want := range []string{"b:1", "c:1", "a:1"} {
		if s, d := next(); s != want || d > 20*time.Millisecond {
			t.Fatalf("first pass: %s after %v, want %s at once", s, d, want)
		}
	}
	// A whole pass failed: the next one starts after the pause.
	if s, d := next(); s != "b:1" || d < 30*time.Millisecond {
		t.Fatalf("second pass: %s after %v, want b:1 after the pause", s, d)
	}
	h.Connected() // attached to b
	// Lost b: the others are tried at once, then b again after a pause.
	for _, want := range []string{"c:1", "a:1"} {
		if s, d := next(); s != want || d > 20*time.Millisecond {
			t.Fatalf("after losing b: %s after %v, want %s at once", s, d, want)
		}
	}
	if s, d := next(); s != "b:1" || d < 30*time.Millisecond {
		t.Fatalf("back to b: %s after %v, want the pause", s, d)
	}
	if err := (&orderedHosts{}).Init(nil); err == nil {
		t.Error("Init with no servers: no error")
	}
}

func TestErrorsOfBothClients(t *testing.T) {
	unknown4 := fmt.Errorf("unknown error: %v", -4) // as go-zookeeper 1.0.4 reports a code it has no variable for
	for _, c := range []struct {
		err        error
		exists     bool
		loss       bool
		kind       string
		unknownNum int
	}{
		{zk.ErrNodeExists, true, false, "node already exists", 0},
		{vocab.NodeExists, true, false, vocab.NodeExists.String(), 0},
		{zk.ErrConnectionClosed, false, true, "connection closed", 0},
		{zk.ErrNoServer, false, true, "could not connect to a server", 0},
		{vocab.ConnectionLoss, false, true, vocab.ConnectionLoss.String(), 0},
		{unknown4, false, true, "ConnectionLoss (-4) from the server", -4},
		{fmt.Errorf("unknown error: %v", -7), false, false, "OperationTimeout (-7) from the server", -7},
		{fmt.Errorf("unknown error: %v", -999), false, false, "unknown error: -999", -999},
		{zk.ErrNoNode, false, false, "node does not exist", 0},
		{context.DeadlineExceeded, false, false, "timeout", 0},
	} {
		if got := isNodeExists(c.err); got != c.exists {
			t.Errorf("isNodeExists(%v) = %v", c.err, got)
		}
		if got := isConnLoss(c.err); got != c.loss {
			t.Errorf("isConnLoss(%v) = %v", c.err, got)
		}
		if got := errKind(c.err); got != c.kind {
			t.Errorf("errKind(%v) = %q, want %q", c.err, got, c.kind)
		}
		if got := zkUnknownCode(c.err); got != c.unknownNum {
			t.Errorf("zkUnknownCode(%v) = %d, want %d", c.err, got, c.unknownNum)
		}
	}
	if zkUnknownCode(nil) != 0 || zkUnknownCode(errors.New("unknown error: x")) != 0 {
		t.Error("zkUnknownCode of nil or a non-number")
	}
}

func TestWatchTally(t *testing.T) {
	tally := &watchTally{errs: map[string]uint64{}}
	t0 := time.Unix(100, 0)
	t1 := t0.Add(2 * time.Millisecond) // the writer's ack
	// Three watchers expected: one event before the ack, two after; one
	// watcher of the second write never hears.
	tally.addWrite(t0, t1, 3, []time.Time{t0.Add(time.Millisecond), t1.Add(time.Millisecond), t1.Add(3 * time.Millisecond)})
	tally.addWrite(t0, t1, 3, []time.Time{t1.Add(time.Millisecond), t1.Add(time.Millisecond)})
	if tally.writes != 2 || tally.events != 5 || tally.early != 1 || tally.missed != 1 {
		t.Fatalf("writes %d events %d early %d missed %d, want 2 5 1 1", tally.writes, tally.events, tally.early, tally.missed)
	}
	// ack→ev: 0, 1, 3, 1, 1 ms; req→ev: 1, 3, 5, 3, 3 ms.
	// Percentiles are bucket tops: at most 1/128 above the exact value.
	near := func(got, want time.Duration) bool {
		return got >= want && float64(got-want) <= histRelErr*float64(want)
	}
	if got := tally.ack.percentile(0.5); !near(got, time.Millisecond) {
		t.Errorf("ack p50 %v, want 1ms", got)
	}
	if got := tally.ack.percentile(0.2); got != 0 {
		t.Errorf("ack p20 %v, want 0 (the early event)", got)
	}
	if got := time.Duration(tally.ack.max); got != 3*time.Millisecond {
		t.Errorf("ack max %v, want 3ms", got)
	}
	if got := tally.req.percentile(0.5); !near(got, 3*time.Millisecond) {
		t.Errorf("req p50 %v, want 3ms", got)
	}
	if got := tally.req.percentile(1); got != 5*time.Millisecond {
		t.Errorf("req max %v, want 5ms", got)
	}
}

func TestWatchKeyWaitFor(t *testing.T) {
	k := &watchKey{poke: make(chan struct{}, 1)}
	go func() {
		for range 3 {
			time.Sleep(5 * time.Millisecond)
			k.mu.Lock()
			k.armed++
			k.mu.Unlock()
			k.notify()
		}
	}()
	t0 := time.Now()
	k.waitFor(context.Background(), t0.Add(5*time.Second), func() bool { return k.armed >= 3 })
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("waitFor took %v: missed a notification", d)
	}
	t0 = time.Now()
	k.waitFor(context.Background(), t0.Add(30*time.Millisecond), func() bool { return false })
	if d := time.Since(t0); d < 30*time.Millisecond || d > 2*time.Second {
		t.Fatalf("waitFor with a false condition returned after %v, want the 30ms deadline", d)
	}
}

// fakeStore is an in-memory server for the workloads: data and one-shot
// data watches.
type fakeStore struct {
	mu      sync.Mutex
	data    map[string][]byte
	watches map[string][]chan watchFired
	opened  atomic.Int64
}

type fakeSession struct {
	st     *fakeStore
	closed atomic.Bool
}

var errFakeClosed = errors.New("zk: connection closed")

func (f *fakeSession) create(_ context.Context, path string, data []byte) error {
	if f.closed.Load() {
		return errFakeClosed
	}
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if _, ok := f.st.data[path]; ok {
		return zk.ErrNodeExists
	}
	f.st.data[path] = data
	return nil
}

func (f *fakeSession) set(_ context.Context, path string, data []byte) error {
	if f.closed.Load() {
		return errFakeClosed
	}
	f.st.mu.Lock()
	ws := f.st.watches[path]
	delete(f.st.watches, path)
	f.st.data[path] = data
	f.st.mu.Unlock()
	for _, ch := range ws {
		ch <- watchFired{at: time.Now(), changed: true}
	}
	return nil
}

func (f *fakeSession) get(_ context.Context, path string) error {
	if f.closed.Load() {
		return errFakeClosed
	}
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if _, ok := f.st.data[path]; !ok {
		return zk.ErrNoNode
	}
	return nil
}

func (f *fakeSession) getW(ctx context.Context, path string) (<-chan watchFired, error) {
	if err := f.get(ctx, path); err != nil {
		return nil, err
	}
	ch := make(chan watchFired, 1)
	f.st.mu.Lock()
	f.st.watches[path] = append(f.st.watches[path], ch)
	f.st.mu.Unlock()
	return ch, nil
}

func (f *fakeSession) close() { f.closed.Store(true) }

func fakeBench(t *testing.T, args ...string) (*bench, *fakeStore) {
	t.Helper()
	cfg, err := parseConfig(append([]string{"-servers", "fake:1", "-protocol", "zk"}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	st := &fakeStore{data: map[string][]byte{}, watches: map[string][]chan watchFired{}}
	b := newBench(cfg, cfg.servers, nil, slog.New(slog.DiscardHandler))
	b.open = func(ctx context.Context, i int, disc *atomic.Uint64) (session, error) {
		st.opened.Add(1)
		return &fakeSession{st: st}, nil
	}
	if err := b.prepare(context.Background(), io.Discard); err != nil {
		t.Fatal(err)
	}
	return b, st
}

func TestWatchWorkloadOnFakeServer(t *testing.T) {
	b, st := fakeBench(t, "-keys", "10", "-watch-keys", "3", "-duration", "300ms", "-warmup", "50ms", "-op-timeout", "1s")
	res, err := b.runWatch(context.Background(), 4)
	if err != nil {
		t.Fatal(err)
	}
	if res.Watchers != 4 || res.Keys != 3 || res.Writes == 0 {
		t.Fatalf("watchers %d keys %d writes %d", res.Watchers, res.Keys, res.Writes)
	}
	if res.Events != 4*res.Writes || res.Missed != 0 || res.Unarmed != 0 || res.Errors != 0 {
		t.Errorf("events %d for %d writes × 4 watchers; missed %d unarmed %d errors %d", res.Events, res.Writes, res.Missed, res.Unarmed, res.Errors)
	}
	if res.ReqP50 <= 0 || res.ReqP50 < res.AckP50 || res.ReqP999 < res.ReqP50 {
		t.Errorf("req→ev p50 %v p999 %v, ack→ev p50 %v", res.ReqP50, res.ReqP999, res.AckP50)
	}
	if n := st.opened.Load(); n != 1+4+3 {
		t.Errorf("%d sessions opened, want 1 (prepare) + 4 watchers + 3 writers", n)
	}
}

func TestRunOneOnFakeServer(t *testing.T) {
	b, st := fakeBench(t, "-keys", "10", "-duration", "200ms", "-warmup", "50ms")
	for _, wl := range []string{"create", "set", "get", "mixed"} {
		res, err := b.runOne(context.Background(), wl, 2, 3)
		if err != nil {
			t.Fatal(err)
		}
		if res.Ops == 0 || res.Errors != 0 || res.Stuck != 0 || res.P50 <= 0 || res.P50 > res.P99 {
			t.Errorf("%s: ops %d errors %d stuck %d p50 %v p99 %v", wl, res.Ops, res.Errors, res.Stuck, res.P50, res.P99)
		}
	}
	st.mu.Lock()
	n := len(st.data)
	st.mu.Unlock()
	if n <= 3+2*8+10 {
		t.Errorf("%d znodes after create ran: want more than the prepared ones", n)
	}
}

// jcmd GC.heap_info as OpenJDK 17 prints it for G1.
func TestHeapUsed(t *testing.T) {
	out := "4127:\n garbage-first heap   total 1048576K, used 63012K [0x00000000c0000000, 0x0000000100000000)\n  region size 1024K, 12 young (12288K), 2 survivors (2048K)\n Metaspace       used 21347K, committed 21696K, reserved 1114112K\n"
	if got := heapUsed([]byte(out)); got != 63012<<10 {
		t.Errorf("heapUsed = %d, want %d (the heap's, not Metaspace's)", got, 63012<<10)
	}
	if got := heapUsed([]byte("4127:\nGC.heap_info is not available\n")); got != 0 {
		t.Errorf("without a heap line: %d", got)
	}
}
