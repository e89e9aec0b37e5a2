package recipes

import (
	"context"
	"fmt"

	"coord/vocab"
)

// Semaphore is a distributed counting semaphore: at most max leases are
// held at a time (Curator's InterProcessSemaphoreV2). Every participant
// must use the same max.
//
// Acquiring takes an internal Mutex (dir/lock), creates an
// ephemeral-sequential lease node under dir/leases and, while it is not
// among the first max leases, waits for the leases to change; then it
// releases the internal lock. Only the client holding the internal lock
// watches the leases, and the others wait in the lock's line, each watching
// its predecessor, so a release wakes one client however many wait.
//
// A lease is an ephemeral node: it is lost when the session expires (its
// holder should treat a suspension as a possible loss), and it frees the
// slot for the next waiter.
type Semaphore struct {
	c    Conn
	dir  string
	max  int
	opts options
}

// Lease is one held slot of a Semaphore.
type Lease struct {
	c    Conn
	path string
}

// NewSemaphore returns a semaphore with max leases on directory dir.
func NewSemaphore(c Conn, dir string, max int, opts ...Option) *Semaphore {
	return &Semaphore{c: c, dir: dir, max: max, opts: buildOptions(opts)}
}

// Acquire waits for a lease (or ctx, or the end of the session).
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	if s.max < 1 {
		return nil, fmt.Errorf("recipes: semaphore with max %d", s.max)
	}
	lock := NewMutex(s.c, join(s.dir, "lock"), WithACL(s.opts.acl))
	if err := lock.Lock(ctx); err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := cleanupCtx()
		defer cancel()
		_ = lock.Unlock(cctx)
	}()
	leases := join(s.dir, "leases")
	if err := ensurePath(ctx, s.c, leases, s.opts.acl); err != nil {
		return nil, err
	}
	path, prefix, err := createProtected(ctx, s.c, leases, "lease-", s.opts.data, vocab.ModeEphemeralSequential, s.opts.acl)
	if err != nil {
		if !sessionEnded(err) {
			deleteProtected(s.c, leases, prefix, "")
		}
		return nil, err
	}
	own := baseName(path)
	for {
		var kids []string
		var w <-chan Event
		err := retry(ctx, s.c, func() (err error) {
			kids, _, w, err = s.c.ChildrenW(ctx, leases)
			return err
		})
		if err == nil {
			nodes := sortSeq(kids, "lease-")
			i := indexOf(nodes, own)
			switch {
			case i < 0:
				err = fmt.Errorf("%w: %s", ErrNodeVanished, path)
			case i < s.max:
				return &Lease{c: s.c, path: path}, nil
			default:
				err = waitWatch(ctx, s.c, w)
			}
		}
		if err != nil {
			if !sessionEnded(err) {
				deleteProtected(s.c, leases, prefix, path)
			}
			return nil, err
		}
	}
}

// Release gives the lease back.
func (l *Lease) Release(ctx context.Context) error {
	err := deleteNode(ctx, l.c, l.path)
	if sessionEnded(err) {
		return lost(err)
	}
	return err
}

// Path is the lease's node.
func (l *Lease) Path() string { return l.path }
