package replica

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coord/fsm"
	"coord/vocab"
)

// A follower forwarding many more writes at once than the leader keeps in
// flight (4,096) gets every one answered. Its senders used to hold the
// forwarder's lock while blocked in the stream's Send (gRPC flow control:
// the leader reads no more once 4,096 wait for their answers), and the
// goroutine that reads the answers needed that lock: neither side moved
// again, and the follower's writes (a storm of sessions re-attaching
// through an observer: each is one) hung.
func TestForwardingManyAtOnceDoesNotStall(t *testing.T) {
	c := startHeldCluster(t, 3, 0, time.Second)
	f := c.reps[(c.leader+1)%3]
	const n = 30000
	var done, failed atomic.Int64
	var firstErr atomic.Value
	all := make(chan struct{})
	start := time.Now()
	data := make([]byte, 200)
	// From 2,000 goroutines at once, as 2,000 sessions' handshakes.
	const senders = 2000
	var wg sync.WaitGroup
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += senders {
				f.Submit(&fsm.Command{Type: fsm.CmdCreate, Op: fsm.Op{Type: fsm.CmdCreate, Path: fmt.Sprintf("/f%06d", i), Data: data,
					ACL: vocab.OpenACLUnsafe, Mode: vocab.ModePersistent}}, func(res Result) {
					// A write may fail if the leader changes under the
					// load (raft's own answer); it must not hang.
					if res.Err != nil && !strings.Contains(res.Err.Error(), "leader") && failed.Add(1) == 1 {
						firstErr.Store(res.Err.Error())
					}
					if done.Add(1) == n {
						close(all)
					}
				})
			}
		}()
	}
	var submitted atomic.Int64
	go func() { wg.Wait(); submitted.Store(int64(time.Since(start))) }()
	select {
	case <-all:
	case <-time.After(90 * time.Second):
		// The goroutines still blocked in Submit end with the cluster.
		t.Fatalf("%d of %d forwarded writes answered after 90 s (all submitted: %v)", done.Load(), n, submitted.Load() != 0)
	}
	t.Logf("%d forwarded writes: all answered in %v, %d failed", n, time.Since(start).Round(time.Millisecond), failed.Load())
	if failed.Load() != 0 {
		t.Fatalf("%d of %d forwarded writes failed, the first with %v", failed.Load(), n, firstErr.Load())
	}
}
