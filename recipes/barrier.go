package recipes

import (
	"context"
	"errors"
	"fmt"

	"coord/vocab"
)

// Barrier holds clients back until it is removed (ZooKeeper's barrier
// recipe): the barrier is a znode; Wait returns once it does not exist.
// Waiters each watch the node, so its removal notifies each of them once:
// they all go on, which is the point.
//
// The barrier node is persistent: it survives its creator's session, so a
// barrier set by a client that dies stays up until someone removes it.
// Waiters keep waiting across a suspension; they fail when their own
// session ends.
type Barrier struct {
	c    Conn
	path string
	opts options
}

// NewBarrier returns a barrier at path.
func NewBarrier(c Conn, path string, opts ...Option) *Barrier {
	return &Barrier{c: c, path: path, opts: buildOptions(opts)}
}

// Set raises the barrier (creating the node; already set is fine).
func (b *Barrier) Set(ctx context.Context) error {
	if err := ensurePath(ctx, b.c, parentOf(b.path), b.opts.acl); err != nil {
		return err
	}
	err := retry(ctx, b.c, func() error {
		_, err := b.c.Create(ctx, b.path, b.opts.data, vocab.ModePersistent, b.opts.acl)
		return err
	})
	if errors.Is(err, vocab.NodeExists) {
		return nil
	}
	return err
}

// Remove lowers the barrier, releasing the waiters.
func (b *Barrier) Remove(ctx context.Context) error { return deleteNode(ctx, b.c, b.path) }

// Wait returns once the barrier is down (at once if it is not set). Like
// every read, it sees the state of the server the session is attached to,
// which may not have applied another session's Set yet: a waiter that must
// not pass a barrier raised by someone else has to know it was raised (see
// it exist, or be told after the Set returned through a znode it wrote or
// watched) before it calls Wait.
func (b *Barrier) Wait(ctx context.Context) error { return waitGone(ctx, b.c, b.path) }

const (
	participantLabel = "p-"
	readyNode        = "ready"
)

// DoubleBarrier lets size clients start together and finish together
// (ZooKeeper's double barrier): Enter returns once size participants have
// entered, Leave once all of them have left.
//
// Enter creates an ephemeral-sequential participant node; the participant
// that completes the count creates dir/ready, whose creation wakes the
// others (each watched it before counting). Leave uses the recipe's
// lowest/highest optimisation: the lowest participant waits for the
// highest to go, every other participant deletes its node and waits for the
// lowest, so each departure wakes at most one waiter until the lowest, last
// out, releases the rest.
//
// A participant whose session expires drops out: its node is deleted, so
// it no longer holds back the others' Leave (and no longer counts toward
// Enter). The last participant to leave removes dir/ready, so a directory
// can be used for one round after another, provided a round starts after
// the previous one has left. A DoubleBarrier value is one participant.
type DoubleBarrier struct {
	c    Conn
	dir  string
	size int
	opts options
	path string
}

// NewDoubleBarrier returns a participant of a double barrier for size
// clients on directory dir.
func NewDoubleBarrier(c Conn, dir string, size int, opts ...Option) *DoubleBarrier {
	return &DoubleBarrier{c: c, dir: dir, size: size, opts: buildOptions(opts)}
}

// Enter joins the barrier and waits until size participants have joined.
// If ctx ends first the participant leaves again.
func (b *DoubleBarrier) Enter(ctx context.Context) error {
	if b.path != "" {
		return errors.New("recipes: double barrier entered twice")
	}
	if err := ensurePath(ctx, b.c, b.dir, b.opts.acl); err != nil {
		return err
	}
	ready := join(b.dir, readyNode)
	// Watch for ready before counting, so its creation is not missed.
	var ok bool
	var w <-chan Event
	err := retry(ctx, b.c, func() (err error) {
		ok, _, w, err = b.c.ExistsW(ctx, ready)
		return err
	})
	if err != nil {
		return err
	}
	path, prefix, err := createProtected(ctx, b.c, b.dir, participantLabel, b.opts.data, vocab.ModeEphemeralSequential, b.opts.acl)
	if err != nil {
		if !sessionEnded(err) {
			deleteProtected(b.c, b.dir, prefix, "")
		}
		return err
	}
	b.path = path
	fail := func(err error) error {
		if !sessionEnded(err) {
			deleteProtected(b.c, b.dir, prefix, path)
		}
		b.path = ""
		return err
	}
	for !ok {
		kids, err := children(ctx, b.c, b.dir)
		if err != nil {
			return fail(err)
		}
		if len(sortSeq(kids, participantLabel)) >= b.size {
			err := retry(ctx, b.c, func() error {
				_, err := b.c.Create(ctx, ready, nil, vocab.ModePersistent, b.opts.acl)
				return err
			})
			if err != nil && !errors.Is(err, vocab.NodeExists) {
				return fail(err)
			}
			return nil
		}
		if err := waitWatch(ctx, b.c, w); err != nil {
			return fail(err)
		}
		err = retry(ctx, b.c, func() (err error) {
			ok, _, w, err = b.c.ExistsW(ctx, ready)
			return err
		})
		if err != nil {
			return fail(err)
		}
	}
	return nil
}

// Leave leaves the barrier and waits until every participant has left (or
// dropped out with its session).
func (b *DoubleBarrier) Leave(ctx context.Context) error {
	if b.path == "" {
		return errors.New("recipes: double barrier not entered")
	}
	own := baseName(b.path)
	for {
		kids, err := children(ctx, b.c, b.dir)
		if err != nil {
			return err
		}
		nodes := sortSeq(kids, participantLabel)
		i := indexOf(nodes, own)
		switch {
		case len(nodes) == 0:
			b.path = ""
			return nil
		case i >= 0 && len(nodes) == 1:
			// The last one out also takes the ready node down for the
			// next round.
			err := retry(ctx, b.c, func() error {
				_, err := b.c.Multi(ctx, DeleteOp{Path: b.path, Version: AnyVersion}, DeleteOp{Path: join(b.dir, readyNode), Version: AnyVersion})
				return err
			})
			if errors.Is(err, vocab.NoNode) {
				err = deleteNode(ctx, b.c, b.path)
			}
			if err != nil {
				return lost(err)
			}
			b.path = ""
			return nil
		case i == 0:
			// The lowest waits for the highest.
			if err := waitGone(ctx, b.c, join(b.dir, nodes[len(nodes)-1].name)); err != nil {
				return err
			}
		case i > 0:
			if err := deleteNode(ctx, b.c, b.path); err != nil {
				return lost(err)
			}
		default:
			// Gone already: wait for the lowest.
			if st, _ := b.c.State(); !st.Live() {
				return fmt.Errorf("%w: %w", ErrBarrierBroken, sessionErr(st))
			}
			if err := waitGone(ctx, b.c, join(b.dir, nodes[0].name)); err != nil {
				return err
			}
		}
	}
}
