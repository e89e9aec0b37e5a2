package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// bitflipNemesis flips one bit of a file in a voter's data directory while
// the server is down, as a disk that rots does: in a closed raft log
// segment (the open one while there is no closed one yet), in the newest
// snapshot, or in the stable store (raft's term and vote). Then it starts
// the server again and watches what it does: it must either refuse to
// start with a message naming the file, or (the bit was in bytes nothing
// reads) serve a state the converged checker finds equal to its peers'.
//
// A server that refused is rebuilt from its peers at Heal with the
// command docs/deploy.md ("A corrupt data directory") gives an operator:
// coord -rebuild, which sets its raft state aside and starts it empty;
// the leader removes it and adds it back, and sends it a snapshot and the
// log.
type bitflipNemesis struct {
	target  int
	refused bool
	note    string
}

// bitflipWatch is how long the nemesis watches the restarted server.
const bitflipWatch = 15 * time.Second

func (n *bitflipNemesis) Name() string     { return "bitflip" }
func (n *bitflipNemesis) HealNote() string { return n.note }

func (n *bitflipNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	n.note, n.refused = "", false
	i := r.Intn(c.Voters())
	n.target = i
	c.Kill(i)
	dir := c.DataDir(i)
	kinds := []string{"log", "snapshot", "stable"}
	kind := kinds[r.Intn(len(kinds))]
	file, why := flipTarget(dir, kind)
	if file == "" {
		// Nothing of that kind yet (no snapshot so early, say): the log.
		kind = "log"
		if file, why = flipTarget(dir, kind); file == "" {
			return fmt.Sprintf("kill -9 %s; no file to flip a bit in", c.ID(i)), c.Start(i)
		}
	}
	what, err := flipBit(filepath.Join(dir, file), r)
	rel := file
	desc := fmt.Sprintf("kill -9 %s; in its %s (%s%s) flip %s", c.ID(i), kind, rel, why, what)
	if err != nil {
		return desc, errors.Join(err, c.Start(i))
	}
	since := logSize(c.LogPath(i))
	if err := c.Start(i); err != nil {
		return desc, err
	}
	t0 := time.Now()
	for time.Since(t0) < bitflipWatch && ctx.Err() == nil {
		if !c.Running(i) {
			n.refused = true
			return desc + fmt.Sprintf("; %s refused to start: %s", c.ID(i), stopReason(logSince(c.LogPath(i), since))), nil
		}
		if h, err := c.Health(ctx, i); err == nil && h.Healthy {
			return desc + fmt.Sprintf("; %s started and is healthy as %s", c.ID(i), h.Role), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return desc + fmt.Sprintf("; %s neither refused nor became healthy within %v", c.ID(i), bitflipWatch), nil
}

// flipTarget picks the file of a kind in a data directory (relative to
// it), with a note on which it is.
func flipTarget(dir, kind string) (string, string) {
	switch kind {
	case "log":
		if _, err := os.Stat(filepath.Join(dir, "raft.db")); err == nil {
			return "raft.db", ""
		}
		segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
		sort.Strings(segs)
		switch len(segs) {
		case 0:
			return "", ""
		case 1:
			return filepath.Join("wal", filepath.Base(segs[0])), ", the open segment: none is closed yet"
		}
		// Any closed segment: all but the newest.
		return filepath.Join("wal", filepath.Base(segs[len(segs)-2])), ", a closed segment"
	case "snapshot":
		snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
		snaps = slices.DeleteFunc(snaps, func(p string) bool { return strings.Contains(p, ".tmp") })
		sort.Strings(snaps)
		if len(snaps) == 0 {
			return "", ""
		}
		rel, _ := filepath.Rel(dir, snaps[len(snaps)-1])
		return rel, ", the newest"
	case "stable":
		for _, p := range []string{"wal/wal-meta.db", "raft.db"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
				return p, ""
			}
		}
	}
	return "", ""
}

// flipBit flips one bit at a random offset among a file's bytes up to its
// last non-zero one (a preallocated segment's zero tail is not data), and
// says where.
func flipBit(path string, r *rand.Rand) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	used := len(b)
	for used > 0 && b[used-1] == 0 {
		used--
	}
	if used == 0 {
		return "", fmt.Errorf("%s holds no data", path)
	}
	off, bit := r.Intn(used), r.Intn(8)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	was := b[off]
	if _, err := f.WriteAt([]byte{was ^ 1<<bit}, int64(off)); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	return fmt.Sprintf("bit %d of byte %d of %d (0x%02x -> 0x%02x)", bit, off, used, was, was^1<<bit), nil
}

func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSince is what a server's log holds past offset since.
func logSince(path string, since int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < since {
		return ""
	}
	return string(b[since:])
}

func (n *bitflipNemesis) Heal(ctx context.Context, c *Cluster) error {
	i := n.target
	switch {
	case !n.refused && c.Running(i):
		n.note = c.ID(i) + " kept running"
		return nil
	case !n.refused:
		n.note = c.ID(i) + " stopped later: " + stopReason(LogTail(c.LogPath(i), 3000)) + "; started again"
		return c.Start(i)
	}
	t0 := time.Now()
	if err := c.rebuild(ctx, i); err != nil {
		n.note = fmt.Sprintf("rebuilding %s from its peers failed: %v", c.ID(i), err)
		return err
	}
	n.note = fmt.Sprintf("%s rebuilt from its peers (coord -rebuild: set aside, removed, added back) in %v", c.ID(i), time.Since(t0).Round(time.Millisecond))
	return nil
}

// rebuild gives stopped voter i a correct state from its peers with the
// one command docs/deploy.md gives an operator: coord -rebuild (it sets the
// raft state aside and starts empty; the leader removes the server and adds
// it back). It returns once the server says the leader answered, the
// configuration is the original again and the server is healthy.
func (c *Cluster) rebuild(ctx context.Context, i int) error {
	id := c.ID(i)
	since := logSize(c.LogPath(i))
	err := c.startWith(i, func(args []string) []string { return append(args, "-rebuild") })
	if err != nil {
		return err
	}
	// Raft's replication may make the empty server a member again before
	// its request to be rebuilt reaches the leader: done once the server
	// says the leader answered it, and the configuration is whole again.
	want := c.originalMembers()
	for {
		asked := strings.Contains(logSince(c.LogPath(i), since), "rebuilding from the cluster")
		got, err := c.Members(ctx)
		if asked && err == nil && got == want {
			if h, err := c.Health(ctx, i); err == nil && h.Healthy {
				return nil
			}
		}
		if !c.Running(i) {
			return fmt.Errorf("%s exited: %s", id, stopReason(LogTail(c.LogPath(i), 3000)))
		}
		if ctx.Err() != nil {
			return fmt.Errorf("members %s (want %s), %s not healthy: %w", got, want, id, ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
