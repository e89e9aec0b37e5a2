package recipes

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"coord/vocab"
)

const (
	readLabel  = "read-"
	writeLabel = "write-"
)

var rwLabels = []string{readLabel, writeLabel}

// readBlock: a reader waits for the last writer ahead of it.
func readBlock(nodes []seqNode, i int) int {
	for j := i - 1; j >= 0; j-- {
		if nodes[j].label == writeLabel {
			return j
		}
	}
	return -1
}

// RevokeData is what RevokeHolders writes into a holder's lock node to ask
// it to let go (the ZooKeeper recipes guide's "unlock").
var RevokeData = []byte("unlock")

// RWMutex is a distributed read/write lock (ZooKeeper's shared lock recipe):
// any number of readers or one writer. A reader waits only for the last
// writer ahead of it, a writer for the node just ahead of it, each watching
// that one node, so releases wake only the clients that can go on.
// Readers and writers are served in arrival order (a waiting writer holds
// back later readers).
//
// An RWMutex value holds at most one read and one write hold at a time and
// is not re-entrant; use one value per holder.
//
// WithRevocation makes the lock revocable (the guide's revocable shared
// lock): a holder watches its own node, and when another client calls
// RevokeHolders (writing RevokeData into the holders' nodes) the holder's
// Revoked channel closes; the holder is expected to finish and unlock.
// Revocation is cooperative: the lock is not taken away.
//
// On suspension and expiry it behaves as Mutex: a hold is uncertain while
// suspended and lost when the session expires (Unlock then returns an error
// matching ErrSessionLost).
type RWMutex struct {
	c         Conn
	dir       string
	opts      options
	revocable bool
	ensured   atomic.Bool

	mu    sync.Mutex
	read  *rwHold
	write *rwHold
}

type rwHold struct {
	node    *lockNode
	revoked chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// NewRWMutex returns a read/write lock on directory dir.
func NewRWMutex(c Conn, dir string, opts ...Option) *RWMutex {
	o := buildOptions(opts)
	return &RWMutex{c: c, dir: dir, opts: o, revocable: o.revocable}
}

// WithRevocation makes an RWMutex revocable (see RWMutex).
func WithRevocation() Option { return func(o *options) { o.revocable = true } }

// RLock takes a read hold, waiting for writers ahead.
func (rw *RWMutex) RLock(ctx context.Context) error {
	return rw.lock(ctx, &rw.read, readLabel, readBlock)
}

// Lock takes the write hold, waiting for everyone ahead.
func (rw *RWMutex) Lock(ctx context.Context) error {
	return rw.lock(ctx, &rw.write, writeLabel, predecessor)
}

// RUnlock releases the read hold.
func (rw *RWMutex) RUnlock(ctx context.Context) error { return rw.unlock(ctx, &rw.read) }

// Unlock releases the write hold.
func (rw *RWMutex) Unlock(ctx context.Context) error { return rw.unlock(ctx, &rw.write) }

// Revoked returns a channel closed when someone asks the read (read true)
// or write hold to be given up; nil when not held or not revocable.
func (rw *RWMutex) Revoked(read bool) <-chan struct{} {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	h := rw.write
	if read {
		h = rw.read
	}
	if h == nil {
		return nil
	}
	return h.revoked
}

func (rw *RWMutex) lock(ctx context.Context, slot **rwHold, label string, block blocker) error {
	rw.mu.Lock()
	if *slot != nil {
		rw.mu.Unlock()
		return errors.New("recipes: RWMutex already holds this lock (not re-entrant)")
	}
	rw.mu.Unlock()
	n, _, err := acquireNode(ctx, rw.c, rw.dir, label, rwLabels, block, true, &rw.opts, &rw.ensured)
	if err != nil {
		return err
	}
	h := &rwHold{node: n}
	if rw.revocable {
		h.revoked, h.stop, h.done = make(chan struct{}), make(chan struct{}), make(chan struct{})
		go h.watchRevoke(rw.c)
	}
	rw.mu.Lock()
	*slot = h
	rw.mu.Unlock()
	return nil
}

func (rw *RWMutex) unlock(ctx context.Context, slot **rwHold) error {
	rw.mu.Lock()
	h := *slot
	*slot = nil
	rw.mu.Unlock()
	if h == nil {
		return ErrLockNotHeld
	}
	if h.stop != nil {
		close(h.stop)
		<-h.done
	}
	return h.node.release(ctx)
}

// watchRevoke watches the holder's own node for RevokeData.
func (h *rwHold) watchRevoke(c Conn) {
	defer close(h.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-h.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		var data []byte
		var w <-chan Event
		err := retry(ctx, c, func() (err error) {
			data, _, w, err = c.GetW(ctx, h.node.path)
			return err
		})
		if err != nil {
			return
		}
		if string(data) == string(RevokeData) {
			close(h.revoked)
			return
		}
		if err := waitWatch(ctx, c, w); err != nil {
			return
		}
	}
}

// RevokeHolders asks the current holders of the read/write lock on dir to
// let go, by writing RevokeData into their nodes (holders that use
// WithRevocation see their Revoked channel close). It returns how many it
// asked.
func RevokeHolders(ctx context.Context, c Conn, dir string) (int, error) {
	kids, err := children(ctx, c, dir)
	if err != nil {
		return 0, err
	}
	nodes := sortSeq(kids, rwLabels...)
	var holders []seqNode
	for i, n := range nodes {
		if n.label == writeLabel {
			if i == 0 {
				holders = nodes[:1]
			}
			break
		}
		holders = nodes[:i+1]
	}
	asked := 0
	for _, n := range holders {
		err := retry(ctx, c, func() error {
			_, err := c.Set(ctx, join(dir, n.name), RevokeData, AnyVersion)
			return err
		})
		if errors.Is(err, vocab.NoNode) {
			continue
		}
		if err != nil {
			return asked, err
		}
		asked++
	}
	return asked, nil
}
