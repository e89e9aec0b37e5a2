package server

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
// Forward stream, and fails them if the stream breaks.
type forwarder struct {
	s        *Server
	mu       sync.Mutex
	leader   string
	cc       *grpc.ClientConn
	stream   api.Internal_ForwardClient
	cancel   context.CancelFunc
	inflight map[uint64]func(error)
	closed   bool
}

func newForwarder(s *Server) *forwarder {
	return &forwarder{s: s, inflight: map[uint64]func(error){}}
}

func (f *forwarder) send(seq uint64, cmd *fsm.Command, fail func(error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		fail(errClosed)
		return
	}
	if err := f.connectLocked(); err != nil {
		if errors.Is(err, errSelfLeader) {
			// This server took over while the write waited: append it here.
			f.s.proposeOwn(seq, cmd, fail)
			return
		}
		fail(err)
		return
	}
	f.inflight[seq] = fail
	if err := f.stream.Send(&api.ForwardRequest{Seq: seq, Command: cmd.Encode(nil)}); err != nil {
		f.resetLocked(fmt.Errorf("server: forwarding to %s: %w", f.leader, err))
	}
}

// connectLocked makes sure there is a stream to the current leader. While
// there is none (an election is on, or the leader raft still names is
// gone), it keeps trying for leaderWait: nothing has been sent yet, so
// waiting is safe and spares the client a needless connection loss.
func (f *forwarder) connectLocked() error {
	ctx, cancel := context.WithTimeout(context.Background(), f.s.leaderWait())
	defer cancel()
	var lastErr error
	for {
		err := f.tryConnectLocked(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, errSelfLeader) && f.s.raft.State() == raft.Leader {
			f.resetLocked(errors.New("server: this server leads now"))
			return err
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return lastErr
		case <-f.s.closing:
			return errClosed
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (f *forwarder) tryConnectLocked(ctx context.Context) error {
	m, err := f.s.leaderMember(ctx)
	if err != nil {
		return err
	}
	if m.ID == f.s.cfg.ID {
		return errSelfLeader
	}
	if f.stream != nil && f.leader == m.ID {
		return nil
	}
	f.resetLocked(errors.New("server: leader changed"))
	cc, err := grpc.NewClient(m.GRPCAddr, f.s.gate.peerDialOptions()...)
	if err != nil {
		return err
	}
	sctx, scancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "coord-origin", f.s.origin))
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
	f.leader, f.cc, f.stream, f.cancel = m.ID, cc, stream, scancel
	go f.receive(stream)
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
		fail := f.inflight[resp.Seq]
		delete(f.inflight, resp.Seq)
		f.mu.Unlock()
		if resp.Error != "" && fail != nil {
			err := errors.New(resp.Error)
			if resp.Refused {
				err = fmt.Errorf("%w (leader: %s)", errRefused, resp.Error)
			}
			fail(err)
		}
		if resp.Error == "" && resp.Term != 0 {
			// The write committed: apply it now if this log holds it,
			// rather than when raft next hears from the leader.
			f.s.fsm.learnCommit(position{index: resp.Index, term: resp.Term})
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
	f.stream, f.cc, f.cancel, f.leader = nil, nil, nil, ""
	for seq, fail := range f.inflight {
		fail(err)
		delete(f.inflight, seq)
	}
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.resetLocked(errClosed)
}
