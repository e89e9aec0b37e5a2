package replica

import (
	"context"
	"testing"
	"time"
)

// A transfer to a voter that cannot catch up within raft's one election
// timeout (its disk is held for 4 of them) is tried again, and hands over
// leadership once the voter catches up; it fails only when its ctx ends
// first.
func TestTransferLeadershipOutlastsASlowTarget(t *testing.T) {
	const timeout = 200 * time.Millisecond
	c := startHeldCluster(t, 3, 0, timeout)
	target := (c.leader + 1) % 3
	id := c.members[target].ID

	// The target falls behind: the others commit a write it cannot store.
	c.stores[target].holdWrites()
	if err := c.create(c.leader, "/behind"); err != nil {
		t.Fatal(err)
	}
	held := time.AfterFunc(4*timeout, c.stores[target].release)
	defer held.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := c.reps[c.leader].TransferLeadership(ctx, id); err != nil {
		t.Fatalf("transfer to %s, whose disk was held for %v: %v", id, 4*timeout, err)
	}
	if took := time.Since(start); took < 4*timeout {
		t.Fatalf("the transfer returned after %v, before %s could store what it lacked", took, id)
	}
	waitUntil(t, id+" leads", c.reps[target].IsLeader)

	// A target held past the caller's ctx: the transfer reports the timeout.
	next := (target + 1) % 3
	c.stores[next].holdWrites()
	if err := c.create(target, "/behind-again"); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 3*timeout)
	defer cancelShort()
	err := c.reps[target].TransferLeadership(short, c.members[next].ID)
	c.stores[next].release()
	if err == nil || !transferTimedOut(err) {
		t.Fatalf("transfer to %s, held past the caller's deadline: %v, want the transfer timeout", c.members[next].ID, err)
	}
}
