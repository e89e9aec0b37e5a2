package server

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials/insecure"

	"coord/api"
	"coord/server/sessions"
	"coord/vocab"
)

// bucketQuantile interpolates inside the bucket the rank falls in, from
// the bucket's lower bound, as histogram_quantile does: exact values,
// which an estimate from the wrong bucket, the wrong end of the right one
// or the wrong rank would miss.
func TestSamplesBucketQuantile(t *testing.T) {
	bounds := []float64{1, 2, 4, 8}
	// 10 in (0,1], 30 in (1,2], 50 in (2,4], 10 in (4,8], none above.
	cum := []uint64{10, 40, 90, 100, 100}
	for _, c := range []struct{ q, want float64 }{
		{0.05, 0.5}, // rank 5, halfway through the first bucket (from 0)
		{0.10, 1},   // rank 10: the first bucket's top
		{0.25, 1.5}, // rank 25: 15 of (1,2]'s 30
		{0.50, 2.4}, // rank 50: 10 of (2,4]'s 50
		{0.90, 4},   // rank 90
		{0.99, 7.6}, // rank 99: 9 of (4,8]'s 10
		{1.00, 8},   // the last observation
	} {
		if got := bucketQuantile(c.q, bounds, cum); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("q=%v: %v, want %v", c.q, got, c.want)
		}
	}
	// A rank in the +Inf bucket: the highest finite bound.
	if got := bucketQuantile(0.99, bounds, []uint64{0, 0, 0, 1, 3}); got != 8 {
		t.Errorf("+Inf bucket: %v, want 8", got)
	}
	// Empty buckets before and inside: (2,4] holds the one observation.
	if got := bucketQuantile(0.5, bounds, []uint64{0, 0, 1, 1, 1}); got != 3 {
		t.Errorf("one observation in (2,4]: %v, want 3", got)
	}
	// No observations, no buckets, mismatched lengths.
	for _, cum := range [][]uint64{{0, 0, 0, 0, 0}, nil, {1, 2}} {
		if got := bucketQuantile(0.5, bounds, cum); got != 0 {
			t.Errorf("cum %v: %v, want 0", cum, got)
		}
	}
}

// samplerOn is a sampler of a fresh set of the server's metrics (their
// latency histogram, as newServerSampler gathers it) that numbers its
// samples in AppliedIndex.
func samplerOn(interval time.Duration, keep int) (*sampler, *metrics) {
	m := newMetrics(&Server{}) // its gauges, which need a server, are never gathered here
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.latency)
	n := uint64(0)
	return newSampler(interval, keep, reg, func(x *api.Sample) { n++; x.AppliedIndex = n; x.Role = "follower" }, nil), m
}

func lastSample(sm *sampler) *api.Sample {
	l := sm.list()
	return l[len(l)-1]
}

// A sample counts reads and writes by kind, and its write quantiles are of
// the writes since the sample before only: 100 fast writes, then 10 slow
// ones whose quantiles would be the fast ones' if the buckets were not
// taken as differences, then none.
func TestSamplesIntervalQuantiles(t *testing.T) {
	sm, m := samplerOn(time.Hour, sampleKeep)
	observe := func(k sessions.OpKind, n int, d float64) {
		for range n {
			m.latency.WithLabelValues(k.String()).Observe(d)
		}
	}
	sm.take()
	if x := lastSample(sm); x.Reads != 0 || x.Writes != 0 || x.WriteP50Ms != 0 || x.WriteP99Ms != 0 {
		t.Fatalf("first sample of nothing: %v", x)
	}

	// 0.0012 s is in the bucket (0.8 ms, 1.6 ms]: p50 is its middle, p99
	// near its top.
	observe(sessions.OpSetData, 60, 0.0012)
	observe(sessions.OpCreate, 40, 0.0012)
	observe(sessions.OpGetData, 7, 0.0001)
	observe(sessions.OpExists, 3, 0.0001)
	observe(sessions.OpPing, 50, 0.0001) // neither
	observe(sessions.OpSync, 5, 0.0001)  // neither
	sm.take()
	x := lastSample(sm)
	if x.Writes != 100 || x.Reads != 10 {
		t.Fatalf("after 100 writes and 10 reads: writes %d reads %d", x.Writes, x.Reads)
	}
	near(t, "fast p50", x.WriteP50Ms, 1.2)
	near(t, "fast p99", x.WriteP99Ms, 0.8+0.8*0.99)

	// 0.15 s is in (102.4 ms, 204.8 ms].
	observe(sessions.OpDelete, 5, 0.15)
	observe(sessions.OpMulti, 4, 0.15)
	observe(sessions.OpClose, 1, 0.15)
	sm.take()
	x = lastSample(sm)
	if x.Writes != 110 || x.Reads != 10 {
		t.Fatalf("after 10 more writes: writes %d reads %d", x.Writes, x.Reads)
	}
	near(t, "slow p50", x.WriteP50Ms, 102.4+102.4*0.5)
	near(t, "slow p99", x.WriteP99Ms, 102.4+102.4*0.99)

	// Reads only: no write quantiles.
	observe(sessions.OpGetChildren, 5, 0.0001)
	sm.take()
	x = lastSample(sm)
	if x.Writes != 110 || x.Reads != 15 || x.WriteP50Ms != 0 || x.WriteP99Ms != 0 {
		t.Fatalf("an interval of reads only: %v", x)
	}
	// Writes again: the quantiles are of them alone.
	observe(sessions.OpSetACL, 1, 0.0012)
	sm.take()
	near(t, "one write's p50", lastSample(sm).WriteP50Ms, 1.2)
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6 {
		t.Errorf("%s: %v ms, want %v ms", what, got, want)
	}
}

// The ring keeps the last keep samples, oldest first, and run stops when
// told.
func TestSamplesRingBound(t *testing.T) {
	sm, _ := samplerOn(time.Hour, 5)
	for i := 1; i <= 12; i++ {
		sm.take()
		l := sm.list()
		if want := min(i, 5); len(l) != want {
			t.Fatalf("after %d samples: %d kept, want %d", i, len(l), want)
		}
		for j, x := range l {
			if want := uint64(i - len(l) + j + 1); x.AppliedIndex != want {
				t.Fatalf("after %d samples: sample %d is number %d, want %d", i, j, x.AppliedIndex, want)
			}
		}
	}

	// Driven by its loop, with a short interval.
	sm, _ = samplerOn(time.Millisecond, 7)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { sm.run(stop); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sm.mu.Lock()
		taken := sm.taken
		sm.mu.Unlock()
		if taken >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d samples in 30 s at 1 ms", taken)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not stop")
	}
	l := sm.list()
	sm.mu.Lock()
	taken := sm.taken
	sm.mu.Unlock()
	if len(l) != 7 || l[6].AppliedIndex != uint64(taken) {
		t.Fatalf("%d kept of %d taken, the newest number %d", len(l), taken, l[len(l)-1].AppliedIndex)
	}
	for j := 1; j < len(l); j++ {
		if l[j].AppliedIndex != l[j-1].AppliedIndex+1 || l[j].UnixMs < l[j-1].UnixMs {
			t.Fatalf("not oldest first: %v then %v", l[j-1], l[j])
		}
	}
}

// Admin.Samples, on a follower and without credentials: after writes and
// reads through that follower, its next samples count at least them, the
// write quantiles are there exactly in the samples whose writes moved,
// the applied index grew; an interval with no writes has no quantiles.
func TestSamplesAdmin(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 3, 0, withAdmin)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := c.Servers[(c.Leader()+1)%3]
	admin := adminClientAs(t, srv.GRPCAddr(), insecure.NewCredentials(), "") // Samples is open
	samples := func() *api.SamplesResponse {
		t.Helper()
		r, err := admin.Samples(ctx, &api.SamplesRequest{})
		if err != nil {
			t.Fatalf("Samples: %v", err)
		}
		if r.Id != srv.ID() || r.IntervalMs != sampleInterval.Milliseconds() || len(r.Samples) == 0 || len(r.Samples) > sampleKeep {
			t.Fatalf("Samples: id %q interval %d, %d samples", r.Id, r.IntervalMs, len(r.Samples))
		}
		return r
	}
	// Between two samples whose writes moved there are quantiles, and
	// only there; time and the applied index go forward.
	check := func(l []*api.Sample) {
		t.Helper()
		for j := 1; j < len(l); j++ {
			p, x := l[j-1], l[j]
			if x.UnixMs < p.UnixMs || x.Writes < p.Writes || x.Reads < p.Reads || x.AppliedIndex < p.AppliedIndex {
				t.Fatalf("went back: %v then %v", p, x)
			}
			if x.Writes > p.Writes && !(x.WriteP50Ms > 0 && x.WriteP99Ms >= x.WriteP50Ms) {
				t.Fatalf("%d writes and quantiles %v, %v", x.Writes-p.Writes, x.WriteP50Ms, x.WriteP99Ms)
			}
			if x.Writes == p.Writes && (x.WriteP50Ms != 0 || x.WriteP99Ms != 0) {
				t.Fatalf("no writes and quantiles %v, %v", x.WriteP50Ms, x.WriteP99Ms)
			}
		}
	}

	s := newSession(t, srv.GRPCAddr())
	srv.samples.take()
	before := samples().Samples
	b := before[len(before)-1]
	const writes, reads = 25, 40
	mustOK(t, s.create("/s", "", vocab.ModePersistent))
	for i := range writes - 1 {
		mustOK(t, s.set("/s", string(rune('a'+i%26))))
	}
	for range reads {
		mustOK(t, s.get("/s", false))
	}
	s.ping()
	srv.samples.take()
	r := samples()
	check(r.Samples)
	a := r.Samples[len(r.Samples)-1]
	if a.Writes-b.Writes < writes || a.Reads-b.Reads < reads {
		t.Fatalf("after %d writes and %d reads: writes %d→%d, reads %d→%d", writes, reads, b.Writes, a.Writes, b.Reads, a.Reads)
	}
	if a.AppliedIndex <= b.AppliedIndex || a.CommitIndex == 0 || a.Role != "follower" {
		t.Fatalf("applied %d→%d, commit %d, role %q", b.AppliedIndex, a.AppliedIndex, a.CommitIndex, a.Role)
	}
	moved := false
	for _, x := range r.Samples {
		moved = moved || (x.UnixMs >= b.UnixMs && x.Writes > b.Writes && x.WriteP50Ms > 0)
	}
	if !moved {
		t.Fatal("no sample after the writes has their quantiles")
	}
	t.Logf("writes %d→%d, reads %d→%d, p50 %.3f ms, p99 %.3f ms, applied %d→%d",
		b.Writes, a.Writes, b.Reads, a.Reads, a.WriteP50Ms, a.WriteP99Ms, b.AppliedIndex, a.AppliedIndex)

	// An interval without writes.
	mustOK(t, s.get("/s", false))
	srv.samples.take()
	srv.samples.take()
	r = samples()
	check(r.Samples)
	if x := r.Samples[len(r.Samples)-1]; x.Writes != a.Writes || x.WriteP50Ms != 0 || x.WriteP99Ms != 0 {
		t.Fatalf("an interval without writes: %v", x)
	}
}

// Admin.Sessions says how many watches a session connected to the
// answering server holds; another server, which does not know its
// watches, says 0. A fired watch is no longer counted.
func TestSamplesSessionsWatches(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 3, 0, withAdmin)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	li := c.Leader()
	here := c.Servers[(li+1)%3]
	s := newSession(t, here.GRPCAddr())
	mustOK(t, s.create("/w", "", vocab.ModePersistent))
	mustOK(t, s.get("/w", true))      // a data watch
	mustOK(t, s.children("/w", true)) // a child watch on the same path
	if r := s.do(&api.Request{Op: &api.Request_Exists{Exists: &api.ExistsRequest{Path: "/missing", Watch: true}}}); r.Err != int32(vocab.NoNode) {
		t.Fatalf("exists /missing: %v", vocab.Code(r.Err))
	}
	idle := newSession(t, here.GRPCAddr())
	mustOK(t, idle.sync())

	watchesOf := func(srv *Server, id int64) (int64, bool) {
		t.Helper()
		resp, err := adminClient(t, srv.GRPCAddr()).Sessions(ctx, &api.SessionsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, si := range resp.Sessions {
			if si.Id == id {
				return si.Watches, si.ConnectedHere
			}
		}
		t.Fatalf("session 0x%x not in %v", id, resp.Sessions)
		return 0, false
	}
	if n, here := watchesOf(here, s.id); n != 3 || !here {
		t.Fatalf("the session holds %d watches (connected here %v), want 3", n, here)
	}
	if n, _ := watchesOf(here, idle.id); n != 0 {
		t.Fatalf("a session without watches holds %d", n)
	}
	if n, connected := watchesOf(c.Servers[li], s.id); n != 0 || connected {
		t.Fatalf("the leader says %d watches (connected there %v)", n, connected)
	}

	// A change of /w's data fires the data watch: two are left.
	mustOK(t, idle.set("/w", "x"))
	if ev := s.nextEvent(10 * time.Second); ev.Path != "/w" {
		t.Fatalf("event %v", ev)
	}
	if n, _ := watchesOf(here, s.id); n != 2 {
		t.Fatalf("after one fired: %d watches, want 2", n)
	}
}
