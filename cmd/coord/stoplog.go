package main

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
)

// peerFailuresAtStop are the ERROR records of raft and its transport (as
// logbridge names them) about a peer they cannot reach or a connection
// that ends. Once this server is stopping they are expected: its own
// transport is closing, and in a cluster stopped together (coord local's
// Ctrl-C) the peers are going away too, so a leader that is still closing
// fails its heartbeats and a follower that outlives its leader asks for
// votes. Servers that are not stopping still log them as errors.
var peerFailuresAtStop = []string{
	"raft: failed to appendEntries to",
	"raft: failed to heartbeat to",
	"raft: failed to pipeline appendEntries",
	"raft: failed to start pipeline replication to",
	"raft: failed to make requestVote RPC",
	"transport: failed to accept connection",
	"transport: failed to decode incoming command",
	"transport: failed to flush response",
}

// stopHandler logs the records of peerFailuresAtStop at DEBUG once
// stopping is set, and every other record as it is.
type stopHandler struct {
	slog.Handler
	stopping *atomic.Bool
}

func (h stopHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelError && h.stopping.Load() && expectedAtStop(r.Message) {
		r.Level = slog.LevelDebug
		if !h.Handler.Enabled(ctx, r.Level) {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h stopHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return stopHandler{h.Handler.WithAttrs(attrs), h.stopping}
}

func (h stopHandler) WithGroup(name string) slog.Handler {
	return stopHandler{h.Handler.WithGroup(name), h.stopping}
}

func expectedAtStop(msg string) bool {
	for _, p := range peerFailuresAtStop {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
