package replica

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// pipelinePair is a leader's and a follower's raft TCP transport on
// loopback; the follower answers every AppendEntries at once.
func pipelinePair(t *testing.T) (leader, follower *raft.NetworkTransport) {
	t.Helper()
	var err error
	follower, err = raft.NewTCPTransport("127.0.0.1:0", nil, 3, 10*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	leader, err = raft.NewTCPTransport("127.0.0.1:0", nil, 3, 10*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leader.Close(); follower.Close() })
	go func() {
		for rpc := range follower.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
		}
	}()
	return leader, follower
}

// sendUntilStuck sends empty AppendEntries on p, as raft's pipelineSend
// does every commit timeout, after the reader of its answers stopped (raft's
// pipelineDecode returns on a failed answer): it returns the error of the
// send that failed, or nil if a send has not returned within 2 s (hung).
func sendUntilStuck(p raft.AppendPipeline, sends int) (int, error) {
	for i := 0; i < sends; i++ {
		res := make(chan error, 1)
		go func() {
			_, err := p.AppendEntries(&raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}, Term: 1},
				new(raft.AppendEntriesResponse))
			res <- err
		}()
		select {
		case err := <-res:
			if err != nil {
				return i, err
			}
		case <-time.After(2 * time.Second):
			return i, nil
		}
	}
	return sends, errors.New("never stuck")
}

// The hang itself, on hashicorp/raft's own pipeline: once nobody takes its
// answers, a send blocks for good (with the default depth of 2, the second
// send after raft's decoder stopped). Through guardedPipeline the same
// send fails after the wait, so raft's replication loop can close the
// pipeline.
func TestGuardedPipelineFailsWhereRaftsHangs(t *testing.T) {
	leader, follower := pipelinePair(t)
	raw, err := leader.AppendEntriesPipeline("f", follower.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	// One answer taken, as raft's pipelineDecode takes them; then it has
	// gone (a failed answer ends it).
	sendUntilStuck(raw, 1)
	<-raw.Consumer()
	n, err := sendUntilStuck(raw, 1000)
	raw.Close() // lets the hung send return
	if err != nil {
		t.Fatalf("raft's pipeline: send %d failed (%v); expected the hang this guards against", n, err)
	}
	t.Logf("raft's own pipeline hung at send %d once its answers were no longer taken", n)

	p, err := leader.AppendEntriesPipeline("f", follower.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	g := newGuardedPipeline(p, 200*time.Millisecond, "s2", nil, nil)
	defer g.Close()
	sendUntilStuck(g, 1)
	<-g.Consumer()
	start := time.Now()
	n, err = sendUntilStuck(g, 1000)
	if !errors.Is(err, errPipelineStalled) {
		t.Fatalf("guarded pipeline: send %d ended with %v, want errPipelineStalled", n, err)
	}
	t.Logf("guarded: send %d failed with %q after %v", n, err, time.Since(start).Round(time.Millisecond))
}

// While raft takes the answers, the guard lets every request through, in
// order, however many there are.
func TestGuardedPipelinePassesAnswersInOrder(t *testing.T) {
	leader, follower := pipelinePair(t)
	p, err := leader.AppendEntriesPipeline("f", follower.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	g := newGuardedPipeline(p, 200*time.Millisecond, "s2", nil, nil)
	defer g.Close()
	const total = 1000
	got := make(chan uint64, total)
	go func() {
		for f := range g.Consumer() {
			got <- f.Request().PrevLogEntry
		}
	}()
	for i := uint64(1); i <= total; i++ {
		if _, err := g.AppendEntries(&raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax},
			Term: 1, PrevLogEntry: i}, new(raft.AppendEntriesResponse)); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for i := uint64(1); i <= total; i++ {
		select {
		case prev := <-got:
			if prev != i {
				t.Fatalf("answer %d is for request %d", i, prev)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("answer %d not taken in 10 s", i)
		}
	}
}
