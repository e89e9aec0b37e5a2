package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"coord/vocab"
	"coord/zk"
)

// startTestCoord builds cmd/coord and starts one real server with a
// ZooKeeper port.
func startTestCoord(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs a coord server")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "coord")
	if out, err := exec.Command("go", "build", "-o", bin, "coord/cmd/coord").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var err error
	for try := 0; try < 5; try++ {
		var c *cluster
		base := 20000 + rand.IntN(20000)
		c, err = startCluster(context.Background(), bin, t.TempDir(), "warn", []string{"-tick", "500ms"}, 1, 0, base, io.Discard)
		if err == nil {
			t.Cleanup(c.stop)
			return c
		}
	}
	t.Fatal(err)
	return nil
}

// The light client against a real server: watches fire and are spent, a
// restarted server takes the session back with its watches (SetWatches2),
// and a dropped session expires with its ephemeral.
func TestLightClientOnCoord(t *testing.T) {
	c := startTestCoord(t)
	addrs := c.zkAddrs()
	ctx := context.Background()
	var events atomic.Int64
	var back atomic.Int64
	hooks := &lightHooks{}
	onEvent := func(lc *lightConn, ev zk.WatcherEvent, at time.Time) {
		if ev.Path == "/w" && ev.Type == zk.EventNodeDataChanged {
			events.Add(1)
		}
	}
	onBack := func(lc *lightConn, at time.Time, expired bool, err error) {
		if err == nil {
			back.Add(1)
		}
	}
	hooks.event.Store(&onEvent)
	hooks.reconnected.Store(&onBack)
	const timeout = 4 * time.Second
	w, err := dialLight(ctx, 1, addrs, 0, timeout, hooks)
	if err != nil {
		t.Fatal(err)
	}
	defer w.drop()
	ping := startPinger(2, timeout)
	defer ping.close()
	ping.slots[0].Store(w)
	if err := w.create("/w", []byte("0"), vocab.ModePersistent); err != nil {
		t.Fatal(err)
	}
	if err := w.getDataW("/w"); err != nil {
		t.Fatal(err)
	}
	if err := w.existsW("/none"); err != nil || w.watchCount() != 2 {
		t.Fatalf("exists watch on a missing node: %v, %d watches", err, w.watchCount())
	}
	waitUntil(t, "the first event", func() bool { w.setData("/w", []byte("1")); return events.Load() == 1 })
	if w.watchCount() != 1 {
		t.Fatalf("after the event the session holds %d watches, want 1 (the data watch is spent)", w.watchCount())
	}
	if err := w.getDataW("/w"); err != nil {
		t.Fatal(err)
	}

	// Kill the server and start it again: the session comes back to it
	// with both watches.
	<-c.killAsync(1)
	if err := c.restart(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the session back", func() bool { return back.Load() == 1 })
	if conn, exp := w.state(); !conn || exp {
		t.Fatalf("after the restart: connected %v expired %v", conn, exp)
	}
	other, err := dialLight(ctx, 2, addrs, 0, timeout, &lightHooks{})
	if err != nil {
		t.Fatal(err)
	}
	ping.slots[1].Store(other)
	if err := other.setData("/w", []byte("2")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the re-registered watch to fire", func() bool { return events.Load() == 2 })

	// A session dropped without closing expires, and its ephemeral goes.
	if err := other.create("/e", nil, vocab.ModeEphemeral); err != nil {
		t.Fatal(err)
	}
	other.drop()
	waitUntil(t, "the ephemeral of the dropped session to go", func() bool {
		_, err := w.call(zk.OpExists, &zk.ExistsRequest{Path: "/e"}, 5*time.Second)
		return errors.Is(err, vocab.NoNode)
	})
}

// The scale worker's protocol, in process, against a real server:
// sessions, watches, a move of every session, a fan-out and a mass expiry.
func TestScaleWorkerOnCoord(t *testing.T) {
	c := startTestCoord(t)
	addrs := c.zkAddrs()
	ctx := context.Background()
	admin, err := dialLight(ctx, -1, addrs, 0, 4*time.Second, &lightHooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.drop()
	for _, p := range []string{benchRoot, scaleRoot, scaleRoot + "/k", scaleHot, scaleEph} {
		if err := admin.create(p, nil, vocab.ModePersistent); err != nil && !errors.Is(err, vocab.NodeExists) {
			t.Fatal(err)
		}
	}
	for j := range scaleKeys {
		if err := admin.create(scaleKey(j), nil, vocab.ModePersistent); err != nil {
			t.Fatal(err)
		}
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		runScaleWorker([]string{"-servers", strings.Join(addrs, ","), "-from", "0", "-to", "40", "-timeout", "4s"}, inR, outW, io.Discard)
		outW.Close()
	}()
	enc := json.NewEncoder(inW)
	dec := json.NewDecoder(outR)
	// status reads the worker's messages until its counters satisfy cond.
	status := func(what string, cond func(scaleStatus) bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			var m scaleMsg
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if m.Status != nil && cond(*m.Status) {
				return
			}
		}
		t.Fatalf("timed out waiting for %s", what)
	}
	do := func(cmd scaleCmd) scaleMsg {
		t.Helper()
		if err := enc.Encode(cmd); err != nil {
			t.Fatal(err)
		}
		for {
			var m scaleMsg
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("%s: %v", cmd.Cmd, err)
			}
			if m.Done == "" {
				continue
			}
			if m.Done != cmd.Cmd || m.Err != "" {
				t.Fatalf("%s: answered %+v", cmd.Cmd, m)
			}
			return m
		}
	}
	if m := do(scaleCmd{Cmd: "connect"}); len(m.PerServer) != 1 || m.PerServer[0] != 40 {
		t.Fatalf("connect: %+v", m)
	}
	if m := do(scaleCmd{Cmd: "watch", Per: 6}); m.Watches != 240 {
		t.Fatalf("watch: %d watches, want 240", m.Watches)
	}
	// A move: every connection closed under its session, every session
	// back with its watches; the fan-out below needs the hot watch
	// re-registered.
	if m := do(scaleCmd{Cmd: "arm-storm", Server: -1}); m.Watches != 240 {
		t.Fatalf("arm a move: %d watches, want 240", m.Watches)
	}
	do(scaleCmd{Cmd: "move"})
	status("40 sessions back", func(s scaleStatus) bool { return s.Down == 40 && s.Back == 40 })
	if m := do(scaleCmd{Cmd: "collect-storm"}); len(m.Times) != 40 || m.Down != 40 || m.Expired != 0 || m.Failed != 0 {
		t.Fatalf("move: %d back, %d down, %d expired, %d failed; want 40, 40, 0, 0", len(m.Times), m.Down, m.Expired, m.Failed)
	}
	do(scaleCmd{Cmd: "arm-fanout"})
	before := time.Now().UnixNano()
	if err := admin.setData(scaleHot, []byte("x")); err != nil {
		t.Fatal(err)
	}
	status("40 events", func(s scaleStatus) bool { return s.Delivered == 40 })
	m := do(scaleCmd{Cmd: "collect-fanout"})
	if len(m.Times) != 40 {
		t.Fatalf("fan-out: %d times, want 40", len(m.Times))
	}
	for _, at := range m.Times {
		if at < before {
			t.Fatalf("an event at %d, before the write at %d", at, before)
		}
	}
	if m := do(scaleCmd{Cmd: "ephemerals"}); m.Pairs != 20 {
		t.Fatalf("ephemerals: %d pairs, want 20", m.Pairs)
	}
	do(scaleCmd{Cmd: "drop"})
	status("20 NodeDeleted events", func(s scaleStatus) bool { return s.Deleted == 20 })
	if m := do(scaleCmd{Cmd: "collect-expiry"}); len(m.Times) != 20 {
		t.Fatalf("expiry: %d times, want 20", len(m.Times))
	}
	enc.Encode(scaleCmd{Cmd: "quit"})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// attemptKind tells the storm's reconnect tries apart: a server that is
// down, one that does not answer in time, one that closes the connection
// (refuses), and one that says the session expired.
func TestAttemptKind(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	silent := make(chan net.Conn, 1)
	go func() {
		c, err := lis.Accept()
		if err == nil {
			silent <- c // held open, never answered
		}
		if c, err := lis.Accept(); err == nil {
			c.Close() // refused: closed at once
		}
	}()
	lc := &lightConn{addrs: []string{addr}, timeout: 300 * time.Millisecond, hooks: &lightHooks{}}
	_, err = lc.handshake(context.Background(), addr)
	if got := attemptKind(err); got != "timeout" {
		t.Errorf("a server that does not answer: %q (%v), want timeout", got, err)
	}
	(<-silent).Close()
	_, err = lc.handshake(context.Background(), addr)
	if got := attemptKind(err); got != "closed" {
		t.Errorf("a server that closes the connection: %q (%v), want closed", got, err)
	}
	lis.Close()
	_, err = lc.handshake(context.Background(), addr)
	if got := attemptKind(err); got != "dial" {
		t.Errorf("no server: %q (%v), want dial", got, err)
	}
	if got := attemptKind(fmt.Errorf("handshake: %w", errLightExpired)); got != "expired" {
		t.Errorf("an expired session: %q", got)
	}
	if got := attemptKind(nil); got != "ok" {
		t.Errorf("success: %q", got)
	}
}

// pastSnapshot counts the entries a server applied past its newest whole
// snapshot: none right after one is taken, each write after it, and a
// snapshot still being written (.tmp) does not count.
func TestPastSnapshot(t *testing.T) {
	c := startTestCoord(t)
	ctx := context.Background()
	s, err := zkOpener(c.zkAddrs(), 10*time.Second, slog.New(slog.DiscardHandler))(ctx, 0, new(atomic.Uint64))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if err := s.create(ctx, "/before", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.takeSnapshot(ctx, 1); err != nil {
		t.Fatal(err)
	}
	after, ok := c.pastSnapshot(ctx, 1)
	if !ok || after > 2 { // a session's ping entries may follow
		t.Fatalf("right after a snapshot: %d entries past it, ok %v", after, ok)
	}
	for i := range 20 {
		if err := s.create(ctx, fmt.Sprintf("/after-%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "s1", "snapshots", "9-99999999-1.tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	n, ok := c.pastSnapshot(ctx, 1)
	if !ok || n < after+20 {
		t.Fatalf("after 20 creates: %d entries past the snapshot (%d before them), ok %v", n, after, ok)
	}
}
