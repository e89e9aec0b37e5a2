package server

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"coord/api"
	"coord/vocab"
)

// Issue 21: snapshots by log size. The proposer packs a loaded cluster's
// writes into few large entries, so raft's entry count (SnapshotThreshold)
// alone lets the log grow without bound; with SnapshotLogBytes every server
// snapshots once the entries applied since its last snapshot pass the
// limit, and compaction keeps the log to about the entries since the
// previous snapshot.

const snapLimit = 256 << 10

// snapLoad has 8 sessions on addr write setData of 2 KiB to znodes of their
// own until about total bytes went into the log; it returns each znode's
// last data.
func snapLoad(t *testing.T, addr string, total int) map[string][]byte {
	t.Helper()
	const sessions, size = 8, 2 << 10
	writes := total / size / sessions
	last := map[string][]byte{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s := newSessionOK(t, addr)
			path := fmt.Sprintf("/snap/w%d", i)
			if r, err := s.tryDo(createReq(path, "", vocab.ModePersistent)); err != nil || (r.Err != 0 && vocab.Code(r.Err) != vocab.NodeExists) {
				errs <- fmt.Errorf("create %s: %v %v", path, r, err)
				return
			}
			var data []byte
			for k := 0; k < writes; k++ {
				data = bytes.Repeat([]byte{byte('a' + k%26)}, size)
				data = append(data[:size-8], fmt.Sprintf("%08d", k)...)
				req := &api.Request{Op: &api.Request_SetData{SetData: &api.SetDataRequest{Path: path, Data: data, Version: -1}}}
				for attempt := 0; ; attempt++ {
					r, err := s.tryDo(req)
					if lost(r, err) && attempt < 10 {
						// A leader change on a loaded machine: the write's
						// fate is unknown; setData again (it is idempotent).
						t.Logf("setData %s #%d: connection lost (%v %v); retrying on a new session", path, k, r, err)
						s.drop()
						s = newSessionOK(t, addr)
						continue
					}
					if err != nil || r.Err != 0 {
						errs <- fmt.Errorf("setData %s #%d: %v %v", path, k, r, err)
						return
					}
					break
				}
			}
			mu.Lock()
			last[path] = data
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return last
}

// checkLogBounded checks that server s snapshotted and that its log (the
// entries raft keeps) and its count since the last snapshot are bounded.
func checkLogBounded(t *testing.T, s *Server, written int) {
	t.Helper()
	st := s.rep.SnapshotStats()
	first, last, logBytes, err := s.rep.LogSize()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d snapshots (last %d bytes in %v, index %d); log [%d, %d] holds %d bytes; %d bytes since the last snapshot (%d written)",
		s.ID(), st.Taken, st.LastSize, st.LastDuration, st.LastIndex, first, last, logBytes, st.LogBytes, written)
	if st.Taken < 2 {
		t.Errorf("%s took %d snapshots with %d bytes written and a limit of %d", s.ID(), st.Taken, written, snapLimit)
	}
	// The count stops short of the limit by at most one apply chunk (the
	// snapshot is taken while applies go on) ...
	if st.LogBytes > snapLimit+1<<20 {
		t.Errorf("%s: %d log bytes since the last snapshot, limit %d", s.ID(), st.LogBytes, snapLimit)
	}
	// ... and the log keeps the entries since the previous snapshot.
	if logBytes > 2*snapLimit+2<<20 {
		t.Errorf("%s: the log holds %d bytes, want about 2×%d at most", s.ID(), logBytes, snapLimit)
	}
}

func TestSnapshotByLogSizeBoundsLog(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 3, 0, func(cfg *Config) { cfg.SnapshotLogBytes = snapLimit })
	li := c.Leader()
	setup := newSessionOK(t, c.Servers[li].GRPCAddr())
	mustOK(t, setup.create("/snap", "", vocab.ModePersistent))
	const total = 16 * snapLimit
	// Half the writes through the leader, half through a follower.
	last := snapLoad(t, c.Servers[li].GRPCAddr(), total/2)
	fi := (li + 1) % 3
	for k, v := range snapLoad(t, c.Servers[fi].GRPCAddr(), total/2) {
		last[k] = v
	}
	c.WaitConverged()
	for _, s := range c.Servers {
		checkLogBounded(t, s, total)
	}

	// A restart loads the snapshot, replays the short tail and has every
	// write; the count of bytes since the snapshot is rebuilt by the replay.
	before := c.Servers[fi].rep.SnapshotStats().LogBytes
	s := c.Restart(fi)
	c.WaitConverged()
	v := s.View()
	for path, want := range last {
		got, _, err := v.GetData(path, nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("after restart %s holds …%q (%v), want …%q", path, tail8(got), err, tail8(want))
		}
	}
	// Unless the replayed bytes passed the threshold the restarted server
	// drew (between half the limit and all of it), which snapshots at once.
	after := s.rep.SnapshotStats()
	switch {
	case after.Taken == 0 && after.LogBytes != before:
		t.Errorf("after restart %d log bytes since the last snapshot, before %d", after.LogBytes, before)
	case after.Taken > 0 && (before < snapLimit/2 || after.LogBytes >= before):
		t.Errorf("after restart %d snapshots and %d log bytes since the last; before %d (limit %d)", after.Taken, after.LogBytes, before, snapLimit)
	case after.Taken > 0 && after.LastIndex < s.rep.ReplayTo():
		// A snapshot by size waits for the replay of the log the server
		// started with (replica.awaitReplay).
		t.Errorf("after restart a snapshot at index %d, inside the replay to %d", after.LastIndex, s.rep.ReplayTo())
	case after.Taken > 0:
		t.Logf("the replay of %d bytes passed the restarted server's threshold: it snapshotted at %d, after the replay to %d", before, after.LastIndex, s.rep.ReplayTo())
	}
}

// The same load with the byte limit off stays under raft's entry count and
// never snapshots: the log holds everything (what the test above guards
// against).
func TestSnapshotByEntryCountAloneLetsLogGrow(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 1, 0, func(cfg *Config) { cfg.SnapshotLogBytes = 0 })
	setup := newSessionOK(t, c.Servers[0].GRPCAddr())
	mustOK(t, setup.create("/snap", "", vocab.ModePersistent))
	const total = 8 * snapLimit
	snapLoad(t, c.Servers[0].GRPCAddr(), total)
	st := c.Servers[0].rep.SnapshotStats()
	_, _, logBytes, err := c.Servers[0].rep.LogSize()
	if err != nil {
		t.Fatal(err)
	}
	if st.Taken != 0 || logBytes < total {
		t.Errorf("without a byte limit: %d snapshots, log holds %d bytes of %d written", st.Taken, logBytes, total)
	}
}

func tail8(b []byte) []byte { return b[max(0, len(b)-8):] }
