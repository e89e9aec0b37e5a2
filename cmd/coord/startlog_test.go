package main

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"coord/internal/testcluster"
	"coord/server"
)

// lockedBuffer is a log destination the server's goroutines share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A single-node server's start: one INFO line names every listener and
// TLS per plane, and the server, which has not served yet, says nothing of
// having lost a leader (every start logged "not serving: no contact with a
// leader for=2562047h47m16.854775807s", then "serving again").
func TestStartLog(t *testing.T) {
	var out lockedBuffer
	// raft on TCP and its stores on disk, as the daemon runs it.
	c := testcluster.New(t, 1, 0, func(cfg *server.Config) {
		testcluster.OnTCP(cfg)
		cfg.Logger = slog.New(slog.NewTextHandler(&out, nil))
	})
	srv := c.Servers[0]
	deadline := time.Now().Add(10 * time.Second)
	for !srv.Serving() {
		if time.Now().After(deadline) {
			t.Fatal("the server does not serve")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The leader-loss loop checks every few milliseconds: give it a few
	// rounds with the leader before looking.
	time.Sleep(200 * time.Millisecond)
	srv.Close()
	log := out.String()
	for _, bad := range []string{"not serving", "serving again", "2562047h"} {
		if strings.Contains(log, bad) {
			t.Errorf("the start logged %q:\n%s", bad, log)
		}
	}
	var started string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `msg="coord server started"`) {
			started = l
		}
	}
	for _, want := range []string{"level=INFO", "raft=" + srv.RaftAddr(), "grpc=" + srv.GRPCAddr(), "zk=" + srv.ZKAddr(),
		"http=" + srv.HTTPAddr(), "gossip=off", "tls_client=off", "tls_admin=off", `tls_peer="on, cluster key"`} {
		if !strings.Contains(started, want) {
			t.Errorf("the start line %q does not say %s", started, want)
		}
	}
}
