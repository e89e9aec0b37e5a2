package recipes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"coord/vocab"
)

// lockNode is one acquisition of a lock-like recipe: an ephemeral-sequential
// znode in the lock's directory, created in protected mode.
type lockNode struct {
	c      Conn
	dir    string
	path   string
	prefix string
}

// blocker returns the index of the node that own (at index i of nodes, in
// sequence order) must wait for, or -1 if own holds the lock.
type blocker func(nodes []seqNode, i int) int

// predecessor blocks on the node just before: an exclusive lock.
func predecessor(nodes []seqNode, i int) int { return i - 1 }

// acquireNode creates a node labelled label in dir and waits until block
// says it holds, each waiter watching only the one node it waits for
// (ZooKeeper's herd-free lock). wait false makes it give up (and delete its
// node) instead of waiting. On any failure the node is deleted.
func acquireNode(ctx context.Context, c Conn, dir, label string, labels []string, block blocker, wait bool, o *options, ensured *atomic.Bool) (*lockNode, bool, error) {
	if !ensured.Load() {
		if err := ensurePath(ctx, c, dir, o.acl); err != nil {
			return nil, false, err
		}
		ensured.Store(true)
	}
	path, prefix, err := createProtected(ctx, c, dir, label, o.data, vocab.ModeEphemeralSequential, o.acl)
	if err != nil {
		if !sessionEnded(err) {
			deleteProtected(c, dir, prefix, "")
		}
		return nil, false, err
	}
	n := &lockNode{c: c, dir: dir, path: path, prefix: prefix}
	ok, err := n.waitTurn(ctx, labels, block, wait)
	if err != nil || !ok {
		if !sessionEnded(err) {
			deleteProtected(c, dir, prefix, path)
		}
		return nil, false, err
	}
	return n, true, nil
}

func (n *lockNode) waitTurn(ctx context.Context, labels []string, block blocker, wait bool) (bool, error) {
	own := baseName(n.path)
	for {
		kids, err := children(ctx, n.c, n.dir)
		if err != nil {
			return false, err
		}
		nodes := sortSeq(kids, labels...)
		i := indexOf(nodes, own)
		if i < 0 {
			if st, _ := n.c.State(); !st.Live() {
				return false, sessionErr(st)
			}
			return false, fmt.Errorf("%w: %s", ErrNodeVanished, n.path)
		}
		b := block(nodes, i)
		if b < 0 {
			return true, nil
		}
		if !wait {
			return false, nil
		}
		// Watch only the blocker: its deletion wakes this waiter alone.
		var w <-chan Event
		err = retry(ctx, n.c, func() (err error) {
			_, _, w, err = n.c.GetW(ctx, join(n.dir, nodes[b].name))
			return err
		})
		if errors.Is(err, vocab.NoNode) {
			continue
		}
		if err != nil {
			return false, err
		}
		if err := waitWatch(ctx, n.c, w); err != nil {
			return false, err
		}
	}
}

// release deletes the node. After the session ended the node is gone
// already and the caller learns that it had lost the lock.
func (n *lockNode) release(ctx context.Context) error {
	err := deleteNode(ctx, n.c, n.path)
	if sessionEnded(err) {
		return lost(err)
	}
	return err
}

// monitor closes lost when the node is deleted or the session ends, until
// stop is closed; done is closed when it returns.
func (n *lockNode) monitor(stop <-chan struct{}, lostCh, done chan struct{}) {
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		var ok bool
		var w <-chan Event
		err := retry(ctx, n.c, func() (err error) {
			ok, _, w, err = n.c.ExistsW(ctx, n.path)
			return err
		})
		if ctx.Err() != nil {
			return
		}
		if err != nil || !ok {
			close(lostCh)
			return
		}
		if err := waitWatch(ctx, n.c, w); err != nil {
			if ctx.Err() == nil {
				close(lostCh)
			}
			return
		}
	}
}

// Mutex is a distributed exclusive lock (ZooKeeper's lock recipe).
//
// Each Lock creates an ephemeral-sequential znode under the lock's
// directory; the holder is the lowest, and every waiter watches only the
// node just before its own, so a release wakes one waiter (no herd). Nodes
// are ordered by their parsed sequence number, which keeps the order after
// the server's counter passes 2^31.
//
// A Mutex value is one holder: Lock on a Mutex that already holds the lock
// only counts (it is re-entrant), and the lock is released by the Unlock
// that balances the first Lock. Use one Mutex value per holder; goroutines
// sharing one share its hold.
//
// The node's name starts with a random id unique to the attempt (as
// Curator's protected mode and ZooKeeper's WriteLock's session prefix do):
// when the answer to the create is lost with the connection, Lock finds its
// node by that id after reconnecting instead of creating a second one that
// would deadlock behind the first.
//
// Guarantees and their limits: while the session lives, at most one holder
// at a time. When the session is suspended (StateSuspended) the holder
// cannot know whether it still holds the lock: the session may expire and
// the lock pass to another holder before this one hears of it. Lost closes
// when the lock is known lost (session expired, or the node deleted).
// Anything the lock guards outside the coordination service must check the
// fencing token (Token, the node's czxid, which grows with every
// acquisition) to reject a stale holder. If the session expires while
// waiting, Lock returns an error matching ErrSessionLost; Unlock of a lock
// lost that way returns ErrSessionLost too.
type Mutex struct {
	c    Conn
	dir  string
	opts options

	acq     chan struct{} // held while acquiring or releasing
	ensured atomic.Bool   // the directory exists

	mu      sync.Mutex
	node    *lockNode
	count   int
	token   int64
	lostCh  chan struct{}
	stopMon chan struct{}
	monDone chan struct{}
}

// NewMutex returns a Mutex on the directory dir (created when needed).
// WithData sets the holder's identity, stored in its node.
func NewMutex(c Conn, dir string, opts ...Option) *Mutex {
	return &Mutex{c: c, dir: dir, opts: buildOptions(opts), acq: make(chan struct{}, 1)}
}

func (m *Mutex) enter(ctx context.Context) error {
	select {
	case m.acq <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Mutex) leave() { <-m.acq }

// Lock acquires the lock, waiting until it is free, ctx ends (use
// context.WithTimeout for a try-lock with timeout) or the session ends.
func (m *Mutex) Lock(ctx context.Context) error {
	_, err := m.lock(ctx, true)
	return err
}

// TryLock acquires the lock if it is free now, without waiting.
func (m *Mutex) TryLock(ctx context.Context) (bool, error) {
	return m.lock(ctx, false)
}

func (m *Mutex) lock(ctx context.Context, wait bool) (bool, error) {
	if err := m.enter(ctx); err != nil {
		return false, err
	}
	defer m.leave()
	m.mu.Lock()
	if m.count > 0 {
		m.count++
		m.mu.Unlock()
		return true, nil
	}
	m.mu.Unlock()
	n, ok, err := acquireNode(ctx, m.c, m.dir, "lock-", []string{"lock-"}, predecessor, wait, &m.opts, &m.ensured)
	if err != nil || !ok {
		return false, err
	}
	var st vocab.Stat
	var exists bool
	err = retry(ctx, m.c, func() (err error) {
		exists, st, err = m.c.Exists(ctx, n.path)
		return err
	})
	if err == nil && !exists {
		err = fmt.Errorf("%w: %s", ErrNodeVanished, n.path)
	}
	if err != nil {
		_ = n.release(context.WithoutCancel(ctx))
		return false, err
	}
	m.mu.Lock()
	m.node, m.count, m.token = n, 1, st.Czxid
	m.lostCh, m.stopMon, m.monDone = nil, nil, nil
	m.mu.Unlock()
	return true, nil
}

// Unlock releases one hold; the last deletes the lock node, waking the next
// waiter. It returns ErrLockNotHeld if the Mutex does not hold the lock, and
// an error matching ErrSessionLost if the session ended while it did.
func (m *Mutex) Unlock(ctx context.Context) error {
	if err := m.enter(ctx); err != nil {
		return err
	}
	defer m.leave()
	m.mu.Lock()
	if m.count == 0 {
		m.mu.Unlock()
		return ErrLockNotHeld
	}
	m.count--
	if m.count > 0 {
		m.mu.Unlock()
		return nil
	}
	n, stop, done := m.node, m.stopMon, m.monDone
	m.node, m.token = nil, 0
	m.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	return n.release(ctx)
}

// IsHeld reports whether this Mutex holds the lock (as far as it knows; see
// Lost).
func (m *Mutex) IsHeld() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count > 0
}

// Token is the fencing token of the current hold: the lock node's czxid,
// larger for every later acquisition of the lock by anyone. 0 when not
// held.
func (m *Mutex) Token() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token
}

// Path is the lock node of the current hold ("" when not held).
func (m *Mutex) Path() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.node == nil {
		return ""
	}
	return m.node.path
}

// Lost returns a channel that is closed if the current hold is lost: the
// session expired or closed, or the lock node was deleted. It watches in a
// goroutine from its first call until Unlock. Nil when not held.
func (m *Mutex) Lost() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.count == 0 {
		return nil
	}
	if m.lostCh == nil {
		m.lostCh, m.stopMon, m.monDone = make(chan struct{}), make(chan struct{}), make(chan struct{})
		go m.node.monitor(m.stopMon, m.lostCh, m.monDone)
	}
	return m.lostCh
}

// LockHolder returns the data of the node that holds the lock on dir (its
// holder's WithData), and NoNode if nobody holds it.
func LockHolder(ctx context.Context, c Conn, dir string) ([]byte, error) {
	return lowestData(ctx, c, dir, "lock-")
}

// lowestData reads the data of the lowest sequential child with one of
// labels, retrying when it vanishes between the two reads.
func lowestData(ctx context.Context, c Conn, dir string, labels ...string) ([]byte, error) {
	for {
		kids, err := children(ctx, c, dir)
		if err != nil {
			return nil, err
		}
		nodes := sortSeq(kids, labels...)
		if len(nodes) == 0 {
			return nil, &vocab.Error{Code: vocab.NoNode, Op: "holder", Path: dir}
		}
		var data []byte
		err = retry(ctx, c, func() (err error) {
			data, _, err = c.Get(ctx, join(dir, nodes[0].name))
			return err
		})
		if errors.Is(err, vocab.NoNode) {
			continue
		}
		return data, err
	}
}
