package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"

	"coord/api"
	"coord/vocab"
)

// -snapshot-during: what a run costs while the servers write snapshots.
// ZooKeeper writes one by itself every 50,000–100,000 transactions (its
// snapCount, drawn anew each time), so a run of a few thousand writes per
// second has them; coord takes one by the bytes of log since the last
// (at least a quarter of the last snapshot's size), which a run of
// 100-byte writes on a big tree does not reach, so coordbench asks every
// coord server for one (Admin.Snapshot), all at once, a second into the
// measured window: the worst case, the three writing together.

// newSuperUser makes the superuser coordbench starts its coord servers
// with: "coordbench:<random password>" and its -super-digest value.
func newSuperUser() (userPassword, digest string) {
	b := make([]byte, 12)
	rand.Read(b)
	userPassword = "coordbench:" + hex.EncodeToString(b)
	return userPassword, vocab.Digest(userPassword)
}

// takeSnapshot asks server i for a snapshot now and waits until it is
// written.
func (c *cluster) takeSnapshot(ctx context.Context, i int) error {
	if c.super == "" {
		return errors.New("this coord binary has no -super-digest: no admin call")
	}
	ctx = metadata.AppendToOutgoingContext(ctx, api.AdminDigestMetadata, c.super)
	_, err := c.admin[i-1].Snapshot(ctx, &api.SnapshotRequest{})
	return err
}

// snapshotCount is the number of snapshots server i has written since it
// started (coord_raft_snapshots_total).
func (c *cluster) snapshotCount(ctx context.Context, i int) int {
	return int(c.metrics(ctx, i, "coord_raft_snapshots_total")[0])
}

// pastSnapshot is server i's applied index less the index of its newest
// whole snapshot (raft names a snapshot's directory term-index-millis; one
// still being written ends in .tmp).
func (c *cluster) pastSnapshot(ctx context.Context, i int) (uint64, bool) {
	st, err := c.status(ctx, i)
	if err != nil {
		return 0, false
	}
	entries, err := os.ReadDir(filepath.Join(c.dir, fmt.Sprintf("s%d", i), "snapshots"))
	if err != nil {
		return 0, false
	}
	var newest uint64
	for _, e := range entries {
		parts := strings.Split(e.Name(), "-")
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") || len(parts) != 3 {
			continue
		}
		if idx, err := strconv.ParseUint(parts[1], 10, 64); err == nil {
			newest = max(newest, idx)
		}
	}
	if newest == 0 || st.AppliedIndex < newest {
		return 0, false
	}
	return st.AppliedIndex - newest, true
}

func (z *zkEnsemble) pastSnapshot(context.Context, int) (uint64, bool) { return 0, false }

func (z *zkEnsemble) takeSnapshot(context.Context, int) error {
	return errors.New("ZooKeeper 3.8 has no command that takes a snapshot")
}

// snapshotCount is the number of snapshot files in server i's version-2
// directory (ZooKeeper keeps them all unless autopurge is set, and
// coordbench's zoo.cfg does not set it).
func (z *zkEnsemble) snapshotCount(_ context.Context, i int) int {
	m, _ := filepath.Glob(filepath.Join(z.dir, fmt.Sprintf("zk%d", i), "version-2", "snapshot.*"))
	return len(m)
}

// snapshotWatch records the snapshots written during one run: it counts
// each server's before, and with ask (coord) has every live server take
// one after delay.
type snapshotWatch struct {
	ens    ensemble
	before []int
	mu     sync.Mutex
	taken  []string // "s1 in 38.2s" or "s1: error"
	wg     sync.WaitGroup
}

func watchSnapshots(ctx context.Context, ens ensemble, ask bool, delay time.Duration) *snapshotWatch {
	w := &snapshotWatch{ens: ens}
	for i := 1; i <= ens.size(); i++ {
		w.before = append(w.before, ens.snapshotCount(ctx, i))
	}
	if !ask {
		return w
	}
	for i := 1; i <= ens.size(); i++ {
		if !ens.alive(i) {
			continue
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			t := time.Now()
			err := ens.takeSnapshot(ctx, i)
			note := fmt.Sprintf("%s in %.1f s", ens.name(i), time.Since(t).Seconds())
			if err != nil {
				note = fmt.Sprintf("%s: %v", ens.name(i), err)
			}
			w.mu.Lock()
			w.taken = append(w.taken, note)
			w.mu.Unlock()
		}()
	}
	return w
}

// report waits for the snapshots asked for and prints what each server
// wrote during the run.
func (w *snapshotWatch) report(ctx context.Context, out io.Writer) {
	w.wg.Wait()
	var parts []string
	for i := 1; i <= w.ens.size(); i++ {
		parts = append(parts, fmt.Sprintf("%s %d", w.ens.name(i), w.ens.snapshotCount(ctx, i)-w.before[i-1]))
	}
	fmt.Fprintf(out, "# snapshots written during the run: %s", strings.Join(parts, ", "))
	if len(w.taken) > 0 {
		fmt.Fprintf(out, " (asked for at once: %s)", strings.Join(w.taken, ", "))
	}
	fmt.Fprintln(out)
}
