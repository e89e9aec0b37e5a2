package replica

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"coord/fsm"
	"coord/session"
)

// The leader's proposer turns commands into raft log entries. While
// maxEntriesInFlight entries are on their way through the log, commands
// that arrive wait and then go together as one entry: each raft entry costs
// the same encoding, storing, sending and bookkeeping on every server
// whether it holds one command or a thousand, so under load this divides
// that cost by the batch size, while a lone command on an idle cluster
// still goes out at once. The order of propose calls is the order of the
// commands in the log.
type proposer struct {
	r *Replica

	mu       sync.Mutex
	pending  []proposal
	inflight int
	wake     chan struct{}
}

type proposal struct {
	at   time.Time // when it was proposed
	ec   entryCmd
	done func(err error, index uint64) // the entry's outcome on this leader
}

const (
	// maxEntriesInFlight bounds the proposer's entries appended but not yet
	// applied here. One: every entry costs each server a bbolt commit (two
	// fdatasyncs) and the servers of a cluster on one disk queue behind each
	// other's, so fewer, larger entries beat pipelining smaller ones (on the
	// 2-core test machine, 16 sessions × 1 request: about 5,000 setData/s
	// with one in flight against 3,700-4,600 with two or four; 64 × 8 about the
	// same; docs/benchmarks.md).
	maxEntriesInFlight = 1
	// maxBatchCommands and maxBatchBytes bound an entry (a single command
	// larger than maxBatchBytes goes alone).
	maxBatchCommands = 1024
	maxBatchBytes    = 1 << 20
)

func newProposer(r *Replica) *proposer {
	return &proposer{r: r, wake: make(chan struct{}, 1)}
}

// propose stamps cmd with the leader's time (and a new session's password,
// and whether quotas are enforced) and queues it for the log; done runs once with the outcome of the entry
// that carries it (an error: it is known not to have applied here, or
// whether it will is unknown).
func (p *proposer) propose(origin string, seq uint64, cmd *fsm.Command, done func(err error, index uint64)) {
	if cmd.Type == fsm.CmdCreateSession {
		pw, err := session.GeneratePassword(rand.Reader)
		if err != nil {
			done(err, 0)
			return
		}
		cmd.Password = pw
	}
	// Set, not or-ed: the leader's setting decides, whatever a forwarding
	// server sent.
	switch cmd.Type {
	case fsm.CmdCreate, fsm.CmdSetData, fsm.CmdMulti:
		cmd.EnforceQuota = p.r.cfg.EnforceQuota
	default:
		cmd.EnforceQuota = false
	}
	p.mu.Lock()
	// Stamped under mu, in the order the entries take: along one leader's
	// log time goes back only if its wall clock does (as on ZooKeeper,
	// whose leader stamps requests with its own clock); a new leader's
	// clock may be behind the old one's.
	cmd.Time = p.r.clock.Now().UnixMilli()
	p.pending = append(p.pending, proposal{at: time.Now(), ec: entryCmd{origin: origin, seq: seq, cmd: cmd.Encode(nil)}, done: done})
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run appends batches until the server closes.
func (p *proposer) run() {
	defer p.r.wg.Done()
	for {
		select {
		case <-p.wake:
			p.flush()
		case <-p.r.closing:
			p.mu.Lock()
			pending := p.pending
			p.pending = nil
			p.mu.Unlock()
			for _, pr := range pending {
				pr.done(ErrClosed, 0)
			}
			return
		}
	}
}

// flush appends entries while there is room in flight.
func (p *proposer) flush() {
	for {
		p.mu.Lock()
		if len(p.pending) == 0 || p.inflight >= maxEntriesInFlight {
			p.mu.Unlock()
			return
		}
		n, size := 0, 0
		for n < len(p.pending) && n < maxBatchCommands && (n == 0 || size+len(p.pending[n].ec.cmd) <= maxBatchBytes) {
			size += len(p.pending[n].ec.cmd)
			n++
		}
		batch := p.pending[:n:n]
		if n == len(p.pending) {
			p.pending = nil
		} else {
			p.pending = append([]proposal(nil), p.pending[n:]...)
		}
		p.inflight++
		p.mu.Unlock()

		cmds := make([]entryCmd, len(batch))
		now := time.Now()
		for i, pr := range batch {
			cmds[i] = pr.ec
			p.r.fsm.stages.ObserveStage(StageProposeQueue, now.Sub(pr.at))
		}
		data := encodeEntry(cmds)
		p.r.fsm.markEntry(data, now)
		fut := p.r.raft.ApplyLog(raft.Log{Data: data}, 0)
		go p.await(fut, batch)
	}
}

// await waits for an entry to apply here (or fail) and reports it to the
// proposals it carries.
func (p *proposer) await(fut raft.ApplyFuture, batch []proposal) {
	err := fut.Error()
	var index uint64
	if err == nil {
		index = fut.Index()
	}
	p.mu.Lock()
	p.inflight--
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	for _, pr := range batch {
		pr.done(err, index)
	}
}
