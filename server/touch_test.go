package server

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"coord/api"
)

// A leader slower to answer a follower's touch report than a tick still
// takes it in: the follower waits for the answer (up to touchReportWait)
// rather than giving up after a tick, so the sessions of its clients, who
// keep pinging, live. With 100,000 sessions on an oversubscribed machine
// every report timed out at a tick for minutes and the leader expired
// whole servers' sessions.
func TestSlowLeaderStillTakesTouches(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	li := c.Leader()
	f := c.Servers[(li+1)%3]
	slow := 4 * c.Configs[li].Tick // every report would time out at a tick
	c.Servers[li].touchDelayForTest.Store(&slow)

	s, err := dialSession(t, f.GRPCAddr(), &api.ConnectRequest{TimeoutMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	timeout := keepPinging(t, s, 4)
	if _, ok := c.Servers[li].View().Session(s.id); !ok {
		t.Fatalf("the leader expired session 0x%x, whose client pinged every %v", s.id, timeout/10)
	}
	// The follower's metric shows what its reports took.
	h := &dto.Metric{}
	if err := f.metrics.touchReports.WithLabelValues("ok").(prometheus.Metric).Write(h); err != nil {
		t.Fatal(err)
	}
	n, sum := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum()
	if n == 0 || time.Duration(sum/float64(n)*float64(time.Second)) < slow {
		t.Fatalf("coord_session_touch_report_seconds{result=ok}: %d reports, %.3f s in all; want each of at least %v", n, sum, slow)
	}
}

// A report to a leader that stops leading while it waits is given up as
// soon as raft names another leader, and the sessions go to the new one:
// a report that waited out touchReportWait on the old leader would leave
// them unreported past their timeout.
func TestTouchReportFollowsANewLeader(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	li := c.Leader()
	fi := (li + 1) % 3
	f := c.Servers[fi]
	stuck := time.Hour // the old leader never answers
	c.Servers[li].touchDelayForTest.Store(&stuck)

	s, err := dialSession(t, f.GRPCAddr(), &api.ConnectRequest{TimeoutMs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * c.Configs[li].Tick) // a report of the session is stuck on the leader by now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Servers[li].rep.TransferLeadership(ctx, c.Servers[(li+2)%3].ID()); err != nil {
		t.Fatal(err)
	}
	timeout := keepPinging(t, s, 3)
	nl := c.Leader()
	if nl == li {
		t.Fatalf("leadership stayed on %s", c.Servers[li].ID())
	}
	if _, ok := c.Servers[nl].View().Session(s.id); !ok {
		t.Fatalf("the new leader expired session 0x%x, whose client pinged every %v", s.id, timeout/10)
	}
}

// keepPinging pings s every tenth of its timeout for n timeouts, failing
// the test if a ping fails (its session expired), and returns the timeout.
func keepPinging(t *testing.T, s *rawSession, n int) time.Duration {
	t.Helper()
	timeout := time.Duration(s.timeout) * time.Millisecond
	for end := time.Now().Add(time.Duration(n) * timeout); time.Now().Before(end); time.Sleep(timeout / 10) {
		if r, err := s.tryDo(&api.Request{Op: &api.Request_Ping{Ping: &api.Ping{}}}); err != nil || r.Err != 0 {
			t.Fatalf("a ping on the follower failed (%v, %v): session 0x%x expired while its client pinged every %v", err, r, s.id, timeout/10)
		}
	}
	return timeout
}
