package server

import (
	"crypto/rand"
	"sync"

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
	s *Server

	mu       sync.Mutex
	pending  []proposal
	inflight int
	wake     chan struct{}
}

type proposal struct {
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

func newProposer(s *Server) *proposer {
	return &proposer{s: s, wake: make(chan struct{}, 1)}
}

// propose stamps cmd with the leader's time (and a new session's password)
// and queues it for the log; done runs once with the outcome of the entry
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
	p.mu.Lock()
	// Stamped in log order, so time never goes back along the log.
	cmd.Time = p.s.clock.Now().UnixMilli()
	p.pending = append(p.pending, proposal{ec: entryCmd{origin: origin, seq: seq, cmd: cmd.Encode(nil)}, done: done})
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run appends batches until the server closes.
func (p *proposer) run() {
	defer p.s.wg.Done()
	for {
		select {
		case <-p.wake:
			p.flush()
		case <-p.s.closing:
			p.mu.Lock()
			pending := p.pending
			p.pending = nil
			p.mu.Unlock()
			for _, pr := range pending {
				pr.done(errClosed, 0)
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
		for i, pr := range batch {
			cmds[i] = pr.ec
		}
		fut := p.s.raft.ApplyLog(raft.Log{Data: encodeEntry(cmds)}, 0)
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
