package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogger returns an hclog.Logger (what raft and memberlist speak) that
// writes through slog, so the whole server logs one way.
func hclogger(l *slog.Logger, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       hclog.Info,
		Output:      &slogWriter{l: l},
		DisableTime: true,
	})
}

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
