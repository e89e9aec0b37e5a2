package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hangingServer's Close never returns, as a raft shutdown that hangs.
type hangingServer struct{ closing chan struct{} }

func (h *hangingServer) Err() error {
	return errors.New("raft log store: write failed: input/output error")
}
func (h *hangingServer) Close() error {
	close(h.closing)
	select {}
}

// A server whose data directory failed exits even when its close hangs,
// and says what held it.
func TestStopFailedDoesNotWaitForAHangingClose(t *testing.T) {
	defer func(w time.Duration) { failedStopWait = w }(failedStopWait)
	failedStopWait = 50 * time.Millisecond
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	h := &hangingServer{closing: make(chan struct{})}
	var stopping atomic.Bool
	done := make(chan int, 1)
	go func() { done <- stopFailed(h, log, &stopping) }()
	select {
	case rc := <-done:
		if rc != 1 {
			t.Errorf("exit %d, want 1", rc)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stopFailed waited for a close that never ends")
	}
	<-h.closing
	got := out.String()
	for _, want := range []string{"stopping: the data directory cannot be written safely", "the shutdown did not finish; exiting without it", "hangingServer"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if !stopping.Load() {
		t.Error("not marked stopping")
	}
}
