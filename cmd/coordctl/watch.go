package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"coord/client"
)

func watchCommand(g *globals) *cobra.Command {
	var recursive bool
	var count int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "watch [-R] PATH",
		Short: "Stream a znode's changes (-R: its subtree's) until interrupted",
		Long: `Set a persistent watch on PATH (-R: recursive, on PATH and everything under
it) and print one line per event until interrupted, --count events have
arrived or --timeout passes. With -o json each event is one JSON object a
line. A "ready" line on standard error says when the watch is set.`,
		Example: `  coordctl watch /app/config
  coordctl watch -R /app
  coordctl watch -R -o json --count 10 /app`,
		Args:              pathArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return g.withSession(ctx, func(c *client.Conn) error {
				events, err := c.AddWatch(ctx, args[0], recursive)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stderr, "watching %s on %s\n", args[0], c.Server())
				enc := json.NewEncoder(g.stdout)
				seen := 0
				for {
					select {
					case <-ctx.Done():
						return nil // interrupted, or --timeout passed: both a normal end
					case ev, ok := <-events:
						if !ok {
							return errors.New("watch ended: the session closed")
						}
						if ev.Type == client.EventSession {
							fmt.Fprintf(g.stderr, "session %s\n", ev.State)
							continue
						}
						if ev.Type == client.EventNotWatching {
							return fmt.Errorf("watch ended: %v", ev.Err)
						}
						if g.output == "json" {
							enc.Encode(map[string]any{"type": ev.Type.String(), "path": ev.Path, "zxid": ev.Zxid})
						} else {
							fmt.Fprintf(g.stdout, "%s %s zxid=0x%x\n", ev.Type, ev.Path, ev.Zxid)
						}
						seen++
						if count > 0 && seen >= count {
							return nil
						}
					}
				}
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "watch the whole subtree")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many events (0: never)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "stop after this long (0: never)")
	return cmd
}
