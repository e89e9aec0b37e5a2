package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"coord/client"
	"coord/vocab"
)

// session is one client session as the workloads use it, over either
// protocol: coord's Go client over gRPC, or go-zookeeper over ZooKeeper's
// wire protocol. Every method may be called from several goroutines at
// once; the calls are pipelined on the session's one connection.
type session interface {
	create(ctx context.Context, path string, data []byte) error
	set(ctx context.Context, path string, data []byte) error
	get(ctx context.Context, path string) error
	// getW reads path and leaves a one-shot data watch on it. The channel
	// receives once: when the watch fires, with the time the event reached
	// the client and whether it was NodeDataChanged (anything else, such as
	// the session ending, gives changed false).
	getW(ctx context.Context, path string) (<-chan watchFired, error)
	// close ends the session; it may be called more than once and from
	// another goroutine while calls are outstanding, which then fail.
	close()
}

type watchFired struct {
	at      time.Time
	changed bool
}

// sessionOpener opens session number i (it decides the session's first
// server from i) and counts its Disconnected/Expired events into disc.
type sessionOpener func(ctx context.Context, i int, disc *atomic.Uint64) (session, error)

// rotate lists servers starting at the i-th (mod len), in list order, so
// that sessions spread round-robin over the servers.
func rotate(servers []string, i int) []string {
	n := len(servers)
	out := make([]string, 0, n)
	for j := range n {
		out = append(out, servers[(i+j)%n])
	}
	return out
}

// --- coord's Go client (gRPC) ---

type grpcSession struct {
	c    *client.Conn
	once sync.Once
	done chan struct{}
}

func grpcOpener(servers []string, logger *slog.Logger) sessionOpener {
	return func(ctx context.Context, i int, disc *atomic.Uint64) (session, error) {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		c, events, err := client.Connect(ctx, rotate(servers, i), client.WithShuffle(false), client.WithLogger(logger))
		if err != nil {
			return nil, err
		}
		s := &grpcSession{c: c, done: make(chan struct{})}
		go func() {
			defer close(s.done)
			for ev := range events {
				if ev.State == client.StateDisconnected || ev.State == client.StateExpired {
					disc.Add(1)
				}
			}
		}()
		return s, nil
	}
}

func (s *grpcSession) create(ctx context.Context, path string, data []byte) error {
	_, err := s.c.Create(ctx, path, data, vocab.ModePersistent, vocab.OpenACLUnsafe)
	return err
}

func (s *grpcSession) set(ctx context.Context, path string, data []byte) error {
	_, err := s.c.Set(ctx, path, data, client.AnyVersion)
	return err
}

func (s *grpcSession) get(ctx context.Context, path string) error {
	_, _, err := s.c.Get(ctx, path)
	return err
}

func (s *grpcSession) getW(ctx context.Context, path string) (<-chan watchFired, error) {
	_, _, ch, err := s.c.GetW(ctx, path)
	if err != nil {
		return nil, err
	}
	out := make(chan watchFired, 1)
	go func() {
		ev, ok := <-ch
		out <- watchFired{at: time.Now(), changed: ok && ev.Type == vocab.EventNodeDataChanged}
	}()
	return out, nil
}

func (s *grpcSession) close() {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.c.Close(ctx)
		<-s.done // the event channel closes once the session has ended
	})
}

// --- go-zookeeper (ZooKeeper's wire protocol) ---

// zkSession wraps a go-zookeeper Conn. Its calls take no context: a call
// returns when the server answers or the connection fails, and close makes
// every outstanding call fail at once, which is how runs bound them.
type zkSession struct {
	c        *zk.Conn
	once     sync.Once
	closing  atomic.Bool
	attached atomic.Bool // has a session on a server now

	// Watch events are stamped in go-zookeeper's receive loop (the event
	// callback runs there before the watch's channel is fed), so the time
	// does not include the watcher goroutine's wake-up.
	mu      sync.Mutex
	arrived map[string]time.Time // path -> arrival of its latest NodeDataChanged
}

// zkOpener connects with a host provider that keeps the session's own
// server order (go-zookeeper's default shuffles the list and sleeps 1 s
// after each unsuccessful pass over it; this one pauses retryPause).
func zkOpener(servers []string, timeout time.Duration, logger *slog.Logger) sessionOpener {
	return func(ctx context.Context, i int, disc *atomic.Uint64) (session, error) {
		s := &zkSession{arrived: map[string]time.Time{}}
		connected := make(chan struct{})
		var once sync.Once
		cb := func(ev zk.Event) {
			switch {
			case ev.Type == zk.EventNodeDataChanged:
				now := time.Now()
				s.mu.Lock()
				s.arrived[ev.Path] = now
				s.mu.Unlock()
			case ev.Type == zk.EventSession && ev.State == zk.StateHasSession:
				s.attached.Store(true)
				once.Do(func() { close(connected) })
			case ev.Type == zk.EventSession && ev.State == zk.StateDisconnected:
				// A session that loses its server counts once, not once per
				// server that refuses it while it looks for another; and
				// go-zookeeper reports Disconnected when Close ends the
				// session too.
				if s.attached.Swap(false) && !s.closing.Load() {
					disc.Add(1)
				}
			case ev.Type == zk.EventSession && ev.State == zk.StateExpired:
				disc.Add(1)
			}
		}
		hp := &orderedHosts{order: rotate(servers, i), retryPause: 20 * time.Millisecond}
		c, _, err := zk.Connect(servers, timeout, zk.WithHostProvider(hp), zk.WithEventCallback(cb),
			zk.WithLogger(zkLogger{logger.With("session", i)}), zk.WithLogInfo(logger.Enabled(ctx, slog.LevelDebug)))
		if err != nil {
			return nil, err
		}
		s.c = c
		t := time.NewTimer(15 * time.Second)
		defer t.Stop()
		select {
		case <-connected:
			return s, nil
		case <-ctx.Done():
			c.Close()
			return nil, ctx.Err()
		case <-t.C:
			c.Close()
			return nil, fmt.Errorf("no ZooKeeper session with %v within 15s", hp.order)
		}
	}
}

func (s *zkSession) create(_ context.Context, path string, data []byte) error {
	_, err := s.c.Create(path, data, 0, zk.WorldACL(zk.PermAll))
	return err
}

func (s *zkSession) set(_ context.Context, path string, data []byte) error {
	_, err := s.c.Set(path, data, -1)
	return err
}

func (s *zkSession) get(_ context.Context, path string) error {
	_, _, err := s.c.Get(path)
	return err
}

func (s *zkSession) getW(_ context.Context, path string) (<-chan watchFired, error) {
	_, _, ch, err := s.c.GetW(path)
	if err != nil {
		return nil, err
	}
	out := make(chan watchFired, 1)
	go func() {
		ev, ok := <-ch
		now := time.Now()
		changed := ok && ev.Type == zk.EventNodeDataChanged
		if changed {
			s.mu.Lock()
			if t, ok := s.arrived[path]; ok {
				now = t
			}
			s.mu.Unlock()
		}
		out <- watchFired{at: now, changed: changed}
	}()
	return out, nil
}

func (s *zkSession) close() {
	s.once.Do(func() {
		s.closing.Store(true)
		s.c.Close()
	})
}

// orderedHosts is a zk.HostProvider that tries the servers in the given
// order (ignoring the shuffled list go-zookeeper passes to Init) and never
// reports a full pass as retryStart, which would make go-zookeeper fail the
// queued requests and sleep a second; it pauses retryPause instead.
type orderedHosts struct {
	order      []string
	retryPause time.Duration

	mu      sync.Mutex
	curr    int
	last    int // index of the last server connected to; -1 none yet
	started bool
}

func (h *orderedHosts) Init([]string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.order) == 0 {
		return errors.New("no servers")
	}
	h.curr, h.last = -1, -1
	return nil
}

func (h *orderedHosts) Len() int { return len(h.order) }

func (h *orderedHosts) Next() (string, bool) {
	h.mu.Lock()
	h.curr = (h.curr + 1) % len(h.order)
	pause := h.started && h.curr == max(h.last, 0)
	h.started = true
	srv := h.order[h.curr]
	h.mu.Unlock()
	if pause {
		time.Sleep(h.retryPause) // a whole pass failed
	}
	return srv, false
}

func (h *orderedHosts) Connected() {
	h.mu.Lock()
	h.last = h.curr
	h.mu.Unlock()
}

type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) { z.l.Debug(fmt.Sprintf(format, args...)) }

// --- errors of both clients ---

func isNodeExists(err error) bool {
	return errors.Is(err, vocab.NodeExists) || errors.Is(err, zk.ErrNodeExists)
}

// isConnLoss: the request's fate is unknown because the connection or the
// session's server went away. (A ZooKeeper server never answers a request
// with ConnectionLoss, -4, but coord does when a write's fate is unknown,
// and go-zookeeper has no name for that code.)
func isConnLoss(err error) bool {
	return errors.Is(err, vocab.ConnectionLoss) || errors.Is(err, zk.ErrConnectionClosed) ||
		errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionMoved) || zkUnknownCode(err) == -4
}

// zkUnknownCode is the error code in go-zookeeper's "unknown error: N"
// (the codes it has no variable for), or 0.
func zkUnknownCode(err error) int {
	if err == nil {
		return 0
	}
	rest, ok := strings.CutPrefix(strings.TrimPrefix(err.Error(), "zk: "), "unknown error: ")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(rest))
	if err != nil {
		return 0
	}
	return n
}

// zkCodeNames names ZooKeeper's system error codes (KeeperException.Code),
// which go-zookeeper reports only as numbers.
var zkCodeNames = map[int]string{
	-1: "SystemError", -2: "RuntimeInconsistency", -3: "DataInconsistency", -4: "ConnectionLoss",
	-5: "MarshallingError", -6: "Unimplemented", -7: "OperationTimeout", -8: "BadArguments",
	-13: "NewConfigNoQuorum", -14: "ReconfigInProgress", -15: "UnknownSession",
}
