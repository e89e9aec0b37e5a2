// Package logbridge sends the logs of the libraries coord embeds (raft and
// its stores speak hclog, memberlist the standard log package) through
// log/slog, so a server logs one way.
package logbridge

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// HCLog returns an hclog.Logger (what raft speaks) that writes through l.
func HCLog(l *slog.Logger, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       hclog.Info,
		Output:      &slogWriter{l: l},
		DisableTime: true,
	})
}

// Writer returns an io.Writer for a standard log.Logger (what memberlist
// speaks) that writes each "[LEVEL] message" line through l.
func Writer(l *slog.Logger) io.Writer { return &slogWriter{l: l} }

// slogWriter turns hclog's "[LEVEL] name: message: k=v" lines into slog records.
type slogWriter struct{ l *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		s := strings.TrimSpace(string(line))
		level := slog.LevelInfo
		for prefix, lv := range map[string]slog.Level{
			"[TRACE]": slog.LevelDebug - 4, "[DEBUG]": slog.LevelDebug, "[INFO]": slog.LevelInfo,
			"[WARN]": slog.LevelWarn, "[ERROR]": slog.LevelError,
		} {
			if rest, ok := strings.CutPrefix(s, prefix); ok {
				level, s = lv, strings.TrimSpace(rest)
				break
			}
		}
		w.l.Log(context.Background(), level, s)
	}
	return len(p), nil
}
