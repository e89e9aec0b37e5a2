package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"coord/api"
	"coord/fsm"
)

// forwarder carries this server's writes to the leader over one ordered
// Forward stream, and fails them if the stream breaks. Writes are queued
// in order under mu and sent by the stream's own goroutine (sendLoop):
// nothing holds mu while a Send waits. Senders used to hold it across
// Send, which blocks under gRPC's flow control once the leader stops
// reading (it does at 4,096 writes awaiting their answers), while the
// goroutine reading the answers needed mu to take them: with thousands of
// writes at once (a storm of sessions re-attaching through one server)
// neither side moved again.
type forwarder struct {
	r        *Replica
	mu       sync.Mutex
	leader   string
	cc       *grpc.ClientConn
	stream   api.Internal_ForwardClient
	cancel   context.CancelFunc
	out      *sendQueue // the stream's writes not yet sent
	inflight map[uint64]forwarded
	closed   bool
}

// sendQueue is one stream's writes waiting for its sendLoop.
type sendQueue struct {
	mu   sync.Mutex
	reqs []*api.ForwardRequest
	wake chan struct{} // cap 1: there is something to send
	done chan struct{} // closed once the stream is dropped
}

func newSendQueue() *sendQueue {
	return &sendQueue{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (q *sendQueue) push(req *api.ForwardRequest) {
	q.mu.Lock()
	q.reqs = append(q.reqs, req)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take waits for writes to send and returns them in order (nil once the
// stream is dropped).
func (q *sendQueue) take(into []*api.ForwardRequest) []*api.ForwardRequest {
	for {
		q.mu.Lock()
		if len(q.reqs) > 0 {
			into = append(into[:0], q.reqs...)
			clear(q.reqs)
			q.reqs = q.reqs[:0]
			q.mu.Unlock()
			return into
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-q.done:
			return nil
		}
	}
}

// forwarded is a write sent to the leader and not yet answered.
type forwarded struct {
	fail func(error)
	sent time.Time
}

func newForwarder(r *Replica) *forwarder {
	return &forwarder{r: r, inflight: map[uint64]forwarded{}}
}

func (f *forwarder) send(seq uint64, cmd *fsm.Command, fail func(error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		fail(ErrClosed)
		return
	}
	if err := f.connectLocked(); err != nil {
		if errors.Is(err, errSelfLeader) {
			// This server took over while the write waited: append it here.
			f.r.proposeOwn(seq, cmd, fail)
			return
		}
		fail(err)
		return
	}
	f.inflight[seq] = forwarded{fail: fail, sent: time.Now()}
	f.out.push(&api.ForwardRequest{Seq: seq, Command: cmd.Encode(nil)})
}

// sendLoop sends stream's queued writes in order until the stream is
// dropped or a Send fails, which drops it.
func (f *forwarder) sendLoop(stream api.Internal_ForwardClient, q *sendQueue) {
	var batch []*api.ForwardRequest
	for {
		if batch = q.take(batch); batch == nil {
			return
		}
		for _, req := range batch {
			if err := stream.Send(req); err != nil {
				f.mu.Lock()
				if f.stream == stream {
					f.resetLocked(fmt.Errorf("server: forwarding to %s: %w", f.leader, err))
				}
				f.mu.Unlock()
				return
			}
		}
	}
}

// connectLocked makes sure there is a stream to the current leader. While
// there is none (an election is on, or the leader raft still names is
// gone), it keeps trying for leaderWait: nothing has been sent yet, so
// waiting is safe and spares the client a needless connection loss.
func (f *forwarder) connectLocked() error {
	ctx, cancel := context.WithTimeout(context.Background(), f.r.LeaderWait())
	defer cancel()
	var lastErr error
	for {
		err := f.tryConnectLocked(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, errSelfLeader) && f.r.raft.State() == raft.Leader {
			f.resetLocked(errors.New("server: this server leads now"))
			return err
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return lastErr
		case <-f.r.closing:
			return ErrClosed
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (f *forwarder) tryConnectLocked(ctx context.Context) error {
	id, addr, err := f.r.Leader(ctx)
	if err != nil {
		return err
	}
	if id == f.r.cfg.ID {
		return errSelfLeader
	}
	if f.stream != nil && f.leader == id {
		return nil
	}
	f.resetLocked(errors.New("server: leader changed"))
	cc, err := grpc.NewClient(addr, f.r.peers.dialOptions()...)
	if err != nil {
		return err
	}
	sctx, scancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "coord-origin", f.r.origin))
	stream, err := api.NewInternalClient(cc).Forward(sctx)
	if err == nil {
		// Make sure the leader answers before sending on the stream: a
		// stream to a dead server fails only at the first Send otherwise.
		_, err = stream.Header()
	}
	if err != nil {
		scancel()
		cc.Close()
		return err
	}
	f.leader, f.cc, f.stream, f.cancel, f.out = id, cc, stream, scancel, newSendQueue()
	go f.receive(stream)
	go f.sendLoop(stream, f.out)
	return nil
}

func (f *forwarder) receive(stream api.Internal_ForwardClient) {
	for {
		resp, err := stream.Recv()
		f.mu.Lock()
		if err != nil {
			if f.stream == stream {
				f.resetLocked(fmt.Errorf("server: forward stream to %s: %w", f.leader, err))
			}
			f.mu.Unlock()
			return
		}
		fw, ok := f.inflight[resp.Seq]
		delete(f.inflight, resp.Seq)
		f.mu.Unlock()
		fail := fw.fail
		if ok && resp.Error == "" {
			now := time.Now()
			f.r.fsm.stages.ObserveStage(StageForward, now.Sub(fw.sent))
			f.r.fsm.forwardAnswered(resp.Seq, now)
		}
		if resp.Error != "" && fail != nil {
			err := errors.New(resp.Error)
			if resp.Refused {
				err = fmt.Errorf("%w (leader: %s)", ErrRefused, resp.Error)
			}
			fail(err)
		}
		if resp.Error == "" && plantedFollowerRead != nil {
			// A planted bug (jepsenplanted builds only): answered once the
			// leader says it committed, before this server applied it.
			f.r.fsm.plantedCompleteEarly(resp.Seq, resp.Index)
		}
		if resp.Error == "" && resp.Term != 0 {
			// The write committed: apply it now if this log holds it,
			// rather than when raft next hears from the leader.
			f.r.fsm.learnCommit(position{index: resp.Index, term: resp.Term})
		}
	}
}

// resetLocked drops the stream and fails what was sent on it but not
// answered: whether those entries commit is unknown, as after a ZooKeeper
// connection loss.
func (f *forwarder) resetLocked(err error) {
	if f.cancel != nil {
		f.cancel()
		f.cc.Close()
	}
	if f.out != nil {
		close(f.out.done)
	}
	f.stream, f.cc, f.cancel, f.leader, f.out = nil, nil, nil, "", nil
	for seq, fw := range f.inflight {
		fw.fail(err)
		delete(f.inflight, seq)
	}
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.resetLocked(ErrClosed)
}

// ServeForward applies a follower's writes (the Internal service's Forward
// stream) in the order they arrive and answers each once it is committed.
func (r *Replica) ServeForward(stream api.Internal_ForwardServer) error {
	origin := ""
	if md, ok := metadata.FromIncomingContext(stream.Context()); ok && len(md.Get("coord-origin")) > 0 {
		origin = md.Get("coord-origin")[0]
	}
	if origin == "" {
		return errors.New("server: Forward needs the coord-origin header")
	}
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	// pending is a forwarded write's outcome on this leader: done closes
	// once err and index are set.
	type pending struct {
		seq   uint64
		done  chan struct{}
		err   error
		index uint64
	}
	queue := make(chan *pending, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var lastIndex, lastTerm uint64 // a batch's commands share an entry
		for p := range queue {
			<-p.done
			resp := &api.ForwardResponse{Seq: p.seq}
			if p.err != nil {
				resp.Error, resp.Refused = p.err.Error(), errors.Is(p.err, ErrRefused)
			} else {
				resp.Index = p.index
				if p.index != lastIndex {
					var l raft.Log
					if r.logs.GetLog(p.index, &l) == nil {
						lastIndex, lastTerm = p.index, l.Term
					} else {
						lastIndex, lastTerm = 0, 0
					}
				}
				if p.index == lastIndex {
					resp.Term = lastTerm
				}
			}
			if stream.Send(resp) != nil {
				for range queue { // drain so the reader never blocks
				}
				return
			}
		}
	}()
	defer func() { close(queue); <-done }()
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		p := &pending{seq: req.Seq, done: make(chan struct{})}
		cmd, err := fsm.DecodeCommand(req.Command)
		switch {
		case err != nil:
			p.err = err
		case r.raft.State() != raft.Leader:
			p.err = raft.ErrNotLeader
		case r.diskLow.Load() && cmd.Type != fsm.CmdCloseSession:
			p.err = ErrDiskFull
		}
		if p.err != nil {
			close(p.done)
		} else {
			r.prop.propose(origin, req.Seq, cmd, func(err error, index uint64) {
				p.err, p.index = err, index
				close(p.done)
			})
		}
		queue <- p
	}
}
