package server

import (
	"coord/vocab"
	"fmt"
	"testing"
	"time"
)

// stageCounts returns how many observations each write stage histogram of
// s holds, and their sums in seconds.
func stageCounts(t *testing.T, s *Server) (map[string]uint64, map[string]float64) {
	t.Helper()
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts, sums := map[string]uint64{}, map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "coord_write_stage_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			st := m.GetLabel()[0].GetValue()
			counts[st], sums[st] = m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
		}
	}
	return counts, sums
}

// Issue 21: every stage of a write is timed where it happens: through the
// leader, the leader times them all but the forward hop; through a
// follower, the follower times its session layer, the forward hop, its
// local apply and the reply, and the leader the proposer and raft.
func TestWriteStagesObserved(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	li := c.Leader()
	fi := (li + 1) % 3
	const n = 20
	for _, i := range []int{li, fi} {
		s := newSession(t, c.Servers[i].GRPCAddr())
		path := fmt.Sprintf("/st%d", i)
		mustOK(t, s.create(path, "", vocab.ModePersistent))
		for k := 0; k < n; k++ {
			mustOK(t, s.set(path, "x"))
		}
		// The reply's stage is observed once the front end wrote it: a
		// read after the writes makes sure the last one was.
		mustOK(t, s.get(path, false))
	}
	lc, ls := stageCounts(t, c.Servers[li])
	// A follower may answer a write as soon as it applied it (the
	// leader's commit notice), before the leader's answer to the forward
	// arrives and times that stage: wait for those answers.
	fc, _ := stageCounts(t, c.Servers[fi])
	for deadline := time.Now().Add(5 * time.Second); fc["forward"] < n+1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		fc, _ = stageCounts(t, c.Servers[fi])
	}
	t.Logf("leader: %v\nfollower: %v", lc, fc)
	for _, st := range []string{"session", "propose_queue", "reply", "total"} {
		if lc[st] < n+1 {
			t.Errorf("leader: %d observations of %s for %d writes through it", lc[st], st, n+1)
		}
	}
	// Per entry: the leader proposes the follower's writes too.
	for _, st := range []string{"raft", "apply"} {
		if lc[st] < n {
			t.Errorf("leader: %d observations of %s", lc[st], st)
		}
	}
	if lc["propose_queue"] < 2*(n+1) {
		t.Errorf("leader: %d proposals timed, want the %d of both sessions", lc["propose_queue"], 2*(n+1))
	}
	if lc["forward"] != 0 || fc["propose_queue"] != 0 || fc["raft"] != 0 {
		t.Errorf("stages timed on the wrong server: leader forward %d, follower propose_queue %d raft %d",
			lc["forward"], fc["propose_queue"], fc["raft"])
	}
	for _, st := range []string{"session", "forward", "reply", "total"} {
		if fc[st] < n+1 {
			t.Errorf("follower: %d observations of %s for %d writes through it", fc[st], st, n+1)
		}
	}
	// The stages of a write lie inside its total.
	if part := ls["session"] + ls["reply"]; part > ls["total"] {
		t.Errorf("leader: session+reply %.6fs > total %.6fs", part, ls["total"])
	}
}
