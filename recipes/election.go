package recipes

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"coord/vocab"
)

const candidateLabel = "n-"

// ElectionEvent is a change in a candidate's leadership.
type ElectionEvent int

const (
	// Elected: the candidate leads.
	Elected ElectionEvent = iota + 1
	// Suspended: the session is suspended; the leader cannot know whether
	// it still leads (its session may expire and another be elected), so
	// it must act as if it did not until Elected again.
	Suspended
	// Follower: the candidate is in line, not leading (after a
	// reconnection that found another leader, or when it joins).
	Follower
	// Lost: the session ended; the candidate is out of the election.
	Lost
	// Resigned: Resign (or Close) took the candidate out.
	Resigned
)

func (e ElectionEvent) String() string {
	switch e {
	case Elected:
		return "Elected"
	case Suspended:
		return "Suspended"
	case Follower:
		return "Follower"
	case Lost:
		return "Lost"
	case Resigned:
		return "Resigned"
	}
	return "ElectionEvent(?)"
}

// Election is a candidate in a leader election (ZooKeeper's election
// recipe, with the reporting of its LeaderElectionSupport).
//
// Each candidate creates an ephemeral-sequential node under dir (its data
// is the candidate's identity, WithData); the lowest leads. A candidate
// watches only the node just ahead of it, so a leader's exit wakes one
// candidate, its successor. Anybody can read the current leader's identity
// with CurrentLeader.
//
// Start enters the election and follows it on one goroutine until Resign
// or the end of the session. Leadership changes are reported by Events (a
// buffered stream that drops its oldest entries rather than block) and by
// Leadership (the current state and a channel closed at its next change).
//
// Sessions: when the session is suspended a leader reports Suspended and
// IsLeader turns false at once: it may lose its session before it hears of
// it. When the session is back it re-checks its place (its node survived
// with the session) and reports Elected again if it still leads. When the
// session expires it reports Lost and leaves the election; a new Election on
// a new session is needed. If its node is deleted by someone else while the
// session lives, it joins again at the end of the line.
type Election struct {
	c    Conn
	dir  string
	opts options

	mu      sync.Mutex
	running bool
	path    string
	leader  bool
	changed chan struct{}
	events  chan ElectionEvent
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
}

// NewElection returns a candidate for the election in dir.
func NewElection(c Conn, dir string, opts ...Option) *Election {
	return &Election{c: c, dir: dir, opts: buildOptions(opts), changed: make(chan struct{}),
		events: make(chan ElectionEvent, 32)}
}

// Start enters the election: it creates the candidate's node and returns;
// a goroutine follows the election from then on.
func (e *Election) Start(ctx context.Context) error {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return errors.New("recipes: election already started")
	}
	e.running = true
	e.mu.Unlock()
	if err := ensurePath(ctx, e.c, e.dir, e.opts.acl); err != nil {
		e.setRunning(false)
		return err
	}
	path, prefix, err := createProtected(ctx, e.c, e.dir, candidateLabel, e.opts.data, vocab.ModeEphemeralSequential, e.opts.acl)
	if err != nil {
		if !sessionEnded(err) {
			deleteProtected(e.c, e.dir, prefix, "")
		}
		e.setRunning(false)
		return err
	}
	rctx, cancel := context.WithCancel(context.Background())
	e.mu.Lock()
	e.path, e.cancel, e.done, e.err = path, cancel, make(chan struct{}), nil
	done := e.done
	e.mu.Unlock()
	e.emit(Follower)
	go e.run(rctx, done)
	return nil
}

func (e *Election) setRunning(r bool) {
	e.mu.Lock()
	e.running = r
	e.mu.Unlock()
}

// emit reports ev, dropping the oldest event if nobody reads.
func (e *Election) emit(ev ElectionEvent) {
	for {
		select {
		case e.events <- ev:
			return
		default:
			select {
			case <-e.events:
			default:
			}
		}
	}
}

func (e *Election) setLeader(l bool, ev ElectionEvent) {
	e.mu.Lock()
	changed := e.leader != l
	e.leader = l
	if changed {
		close(e.changed)
		e.changed = make(chan struct{})
	}
	e.mu.Unlock()
	if changed || ev == Suspended || ev == Lost || ev == Resigned {
		e.emit(ev)
	}
}

func (e *Election) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	err := e.follow(ctx)
	e.mu.Lock()
	e.err = err
	e.mu.Unlock()
	if ctx.Err() == nil {
		e.setLeader(false, Lost)
		e.mu.Lock()
		e.running = false
		close(e.changed)
		e.changed = make(chan struct{})
		e.mu.Unlock()
	}
}

// follow watches the candidate's place until ctx ends or the session does.
func (e *Election) follow(ctx context.Context) error {
	for {
		e.mu.Lock()
		own := e.path
		e.mu.Unlock()
		kids, err := children(ctx, e.c, e.dir)
		if err != nil {
			return err
		}
		nodes := sortSeq(kids, candidateLabel)
		i := indexOf(nodes, baseName(own))
		if i < 0 {
			if st, _ := e.c.State(); !st.Live() {
				return sessionErr(st)
			}
			// Deleted by someone else: join again at the end of the line.
			e.setLeader(false, Follower)
			path, _, err := createProtected(ctx, e.c, e.dir, candidateLabel, e.opts.data, vocab.ModeEphemeralSequential, e.opts.acl)
			if err != nil {
				return err
			}
			e.mu.Lock()
			e.path = path
			e.mu.Unlock()
			continue
		}
		watch := own // the leader watches its own node, a follower its predecessor
		if i == 0 {
			e.setLeader(true, Elected)
		} else {
			e.setLeader(false, Follower)
			watch = join(e.dir, nodes[i-1].name)
		}
		var w <-chan Event
		err = retry(ctx, e.c, func() (err error) {
			_, _, w, err = e.c.GetW(ctx, watch)
			return err
		})
		if errors.Is(err, vocab.NoNode) {
			continue
		}
		if err != nil {
			return err
		}
		if err := e.wait(ctx, w); err != nil {
			return err
		}
	}
}

// wait waits for w, reporting suspensions; it returns nil to re-check the
// candidate's place.
func (e *Election) wait(ctx context.Context, w <-chan Event) error {
	st, changed := e.c.State()
	for {
		if !st.Live() {
			return sessionErr(st)
		}
		select {
		case ev, ok := <-w:
			if !ok || ev.Type == EventNotWatching {
				if st, _ := e.c.State(); !st.Live() {
					return sessionErr(st)
				}
			}
			return nil
		case <-changed:
			st, changed = e.c.State()
			switch st {
			case StateSuspended:
				e.setLeader(false, Suspended)
			case StateReconnected, StateConnected:
				return nil // re-check: the node survived with the session
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Events returns the stream of leadership changes.
func (e *Election) Events() <-chan ElectionEvent { return e.events }

// Leadership reports whether the candidate leads now and a channel closed
// at the next change.
func (e *Election) Leadership() (bool, <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leader && e.sessionUp(), e.changed
}

// IsLeader reports whether the candidate leads now, as far as it knows: it
// is the lowest node and its session is connected.
func (e *Election) IsLeader() bool {
	l, _ := e.Leadership()
	return l
}

func (e *Election) sessionUp() bool {
	st, _ := e.c.State()
	return st == StateConnected || st == StateReconnected
}

// Await waits until the candidate leads, or ctx ends, or the candidate
// leaves the election (an error matching ErrSessionLost when its session
// ended).
func (e *Election) Await(ctx context.Context) error {
	for {
		e.mu.Lock()
		leader, changed, running, err := e.leader && e.sessionUp(), e.changed, e.running, e.err
		e.mu.Unlock()
		if leader {
			return nil
		}
		if !running {
			if err == nil {
				err = errors.New("recipes: election not started")
			}
			return err
		}
		st, sc := e.c.State()
		if !st.Live() {
			return sessionErr(st)
		}
		select {
		case <-changed:
		case <-sc:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Resign leaves the election: the candidate's node is deleted, waking its
// successor. The Election can Start again afterwards.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	cancel, done, path := e.cancel, e.done, e.path
	e.cancel, e.path = nil, ""
	e.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	e.setLeader(false, Resigned)
	err := deleteNode(ctx, e.c, path)
	e.setRunning(false)
	if sessionEnded(err) {
		return nil // the session took the node with it
	}
	return err
}

// Close is Resign.
func (e *Election) Close(ctx context.Context) error { return e.Resign(ctx) }

// Leader returns the identity (node data) of the current leader.
func (e *Election) Leader(ctx context.Context) ([]byte, error) { return CurrentLeader(ctx, e.c, e.dir) }

// CurrentLeader returns the identity (node data) of the leader of the
// election in dir, or a NoNode error if there is no candidate.
func CurrentLeader(ctx context.Context, c Conn, dir string) ([]byte, error) {
	return lowestData(ctx, c, dir, candidateLabel)
}

// LeaderLatch is Curator's leader latch on an Election: Start, Await
// leadership, HasLeadership, Close.
type LeaderLatch struct{ e *Election }

// NewLeaderLatch returns a latch on the election in dir.
func NewLeaderLatch(c Conn, dir string, opts ...Option) *LeaderLatch {
	return &LeaderLatch{e: NewElection(c, dir, opts...)}
}

// Start joins the election.
func (l *LeaderLatch) Start(ctx context.Context) error { return l.e.Start(ctx) }

// Await waits for leadership (see Election.Await).
func (l *LeaderLatch) Await(ctx context.Context) error { return l.e.Await(ctx) }

// HasLeadership reports whether the latch leads now.
func (l *LeaderLatch) HasLeadership() bool { return l.e.IsLeader() }

// Leadership is Election.Leadership.
func (l *LeaderLatch) Leadership() (bool, <-chan struct{}) { return l.e.Leadership() }

// Close leaves the election.
func (l *LeaderLatch) Close(ctx context.Context) error { return l.e.Close(ctx) }

// String describes a candidate for logs.
func (e *Election) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fmt.Sprintf("election %s node %s leader=%v", e.dir, e.path, e.leader)
}
