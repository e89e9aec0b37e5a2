package recipes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"coord/vocab"
)

// Queue is a distributed queue (ZooKeeper's queue recipe) with exactly-once
// consumption and herd-free blocking takes. Items are persistent-sequential
// znodes under dir, taken in order; PriorityQueue and DelayQueue order them
// by priority or due time first.
//
// Consumption: an item is claimed atomically with a multi that creates an
// ephemeral claim node (dir/claims/<item>) and, for Take, deletes the item
// in the same transaction, so exactly one consumer gets each item. A take
// whose answer is lost with the connection is settled by the claim node,
// which stays (owned by the taker's session) until the taker's next take or
// Close: the taker finds it and knows the item is its own. Claim (with Ack
// or Release) keeps the item while it is processed: if the consumer's
// session ends before Ack, the claim vanishes and the item is taken again
// by someone else, so an item is never lost (it may then be processed
// twice; Ack of a lost claim fails).
//
// Blocking: a consumer that finds nothing joins a line of takers (ephemeral
// sequential nodes under dir/takers). Only the first in line watches the
// queue (and the claims that hold items back, and the next due time of a
// delay queue); the others watch their predecessor in the line. An offer
// therefore wakes one consumer, not all of them, and the line moves on as
// each taker leaves it.
//
// Order: items are taken lowest first, by (priority or due time, then
// sequence number parsed as an unsigned number). One producer's items are
// created in its order; a consumer takes them in that order unless an
// earlier item was held back by another consumer's claim.
//
// Sessions: offers and takes wait through a suspension (the adapters retry
// nothing themselves; the queue retries what it can prove harmless). When
// the session expires its claims vanish (their items return to the queue)
// and blocking calls fail with ErrSessionLost.
type Queue struct {
	c       Conn
	dir     string
	claims  string
	takers  string
	offers  string
	opts    options
	delayed bool
	now     func() time.Time

	mu         sync.Mutex
	ensured    bool
	tombstones []string
}

// NewQueue returns a FIFO queue on directory dir.
func NewQueue(c Conn, dir string, opts ...Option) *Queue {
	return &Queue{c: c, dir: dir, claims: join(dir, "claims"), takers: join(dir, "takers"), offers: join(dir, "offers"),
		opts: buildOptions(opts), now: time.Now}
}

// PriorityQueue is a Queue whose items carry a priority: lower numbers are
// taken first, items of one priority in FIFO order.
type PriorityQueue struct{ *Queue }

// NewPriorityQueue returns a priority queue on directory dir.
func NewPriorityQueue(c Conn, dir string, opts ...Option) *PriorityQueue {
	return &PriorityQueue{NewQueue(c, dir, opts...)}
}

// Offer adds an item with a priority.
func (q *PriorityQueue) Offer(ctx context.Context, data []byte, priority int32) (string, error) {
	return q.offer(ctx, data, uint64(int64(priority)-math.MinInt32))
}

// DelayQueue is a Queue whose items are taken only once they are due,
// earliest due first. Due times are the producer's clock plus the delay,
// compared with the consumer's clock: clocks that disagree shift them.
type DelayQueue struct{ *Queue }

// NewDelayQueue returns a delay queue on directory dir.
func NewDelayQueue(c Conn, dir string, opts ...Option) *DelayQueue {
	q := NewQueue(c, dir, opts...)
	q.delayed = true
	return &DelayQueue{q}
}

// Offer adds an item due after delay.
func (q *DelayQueue) Offer(ctx context.Context, data []byte, delay time.Duration) (string, error) {
	return q.offer(ctx, data, uint64(q.now().Add(delay).UnixMilli()))
}

// Offer adds an item at the tail of the queue and returns its node's name.
func (q *Queue) Offer(ctx context.Context, data []byte) (string, error) {
	return q.offer(ctx, data, 0)
}

func (q *Queue) ensure(ctx context.Context) error {
	q.mu.Lock()
	done := q.ensured
	q.mu.Unlock()
	if done {
		return nil
	}
	for _, p := range []string{q.dir, q.claims, q.takers, q.offers} {
		if err := ensurePath(ctx, q.c, p, q.opts.acl); err != nil {
			return err
		}
	}
	q.mu.Lock()
	q.ensured = true
	q.mu.Unlock()
	return nil
}

const itemSeq = "-s"

// offer creates the item together with a receipt, an ephemeral node
// dir/offers/<guid> of this session, in one multi. When the answer is lost
// it sends the same multi again: if the first one applied, the receipt
// exists and the second fails whole, so an item is never offered twice,
// even when a consumer took the first copy before the producer could look
// for it (looking for the item alone, as a protected create does, cannot
// tell "never created" from "created and taken": a 15-minute jepsen run
// saw items dequeued twice that way). Receipts are deleted by this
// queue's next offer or take, or by Close, or go with the session.
func (q *Queue) offer(ctx context.Context, data []byte, key uint64) (string, error) {
	if err := q.ensure(ctx); err != nil {
		return "", err
	}
	prefix := protectedPrefix(newGUID())
	receipt := join(q.offers, prefix)
	label := join(q.dir, fmt.Sprintf("%sq%020d%s", prefix, key, itemSeq))
	backoff := 5 * time.Millisecond
	for {
		ts, ops := q.takeTombstones()
		ops = append(ops, CreateOp{Path: receipt, Mode: vocab.ModeEphemeral, ACL: q.opts.acl},
			CreateOp{Path: label, Data: data, Mode: vocab.ModePersistentSequential, ACL: q.opts.acl})
		res, err := q.c.Multi(ctx, ops...)
		if err == nil {
			q.addTombstone(receipt)
			return baseName(res[len(res)-1].Path), nil
		}
		dropped := q.putTombstones(ts, err)
		var fe *vocab.Error
		if errors.As(err, &fe) && fe.Path == receipt && errors.Is(err, vocab.NodeExists) {
			// An earlier try applied: the item is there, or taken already.
			q.addTombstone(receipt)
			p, err := findProtected(ctx, q.c, q.dir, prefix)
			if err != nil {
				return "", err
			}
			return baseName(p), nil // "" if a consumer took it already
		}
		if dropped {
			continue
		}
		if !isLoss(err) {
			return "", lost(err)
		}
		if err := awaitConnected(ctx, q.c, backoff); err != nil {
			return "", err
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

type queueItem struct {
	name string
	key  uint64
	seq  uint32
}

func parseItem(name string) (queueItem, bool) {
	i := strings.LastIndex(name, itemSeq)
	if i < 0 {
		return queueItem{}, false
	}
	j := strings.LastIndexByte(name[:i], 'q')
	if j < 0 {
		return queueItem{}, false
	}
	key, err := strconv.ParseUint(name[j+1:i], 10, 64)
	if err != nil {
		return queueItem{}, false
	}
	seq, ok := seqOf(name, itemSeq)
	return queueItem{name: name, key: key, seq: seq}, ok
}

func sortItems(kids []string) []queueItem {
	var items []queueItem
	for _, k := range kids {
		if it, ok := parseItem(k); ok {
			items = append(items, it)
		}
	}
	slices.SortFunc(items, func(a, b queueItem) int {
		switch {
		case a.key != b.key:
			if a.key < b.key {
				return -1
			}
			return 1
		case a.seq != b.seq:
			if a.seq < b.seq {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return items
}

// Len counts the items in the queue, claimed ones included.
func (q *Queue) Len(ctx context.Context) (int, error) {
	kids, err := children(ctx, q.c, q.dir)
	if errors.Is(err, vocab.NoNode) {
		return 0, nil
	}
	return len(sortItems(kids)), err
}

// Peek returns the data of the item that would be taken next, or ErrEmpty.
func (q *Queue) Peek(ctx context.Context) ([]byte, error) {
	kids, err := children(ctx, q.c, q.dir)
	if errors.Is(err, vocab.NoNode) {
		return nil, ErrEmpty
	}
	if err != nil {
		return nil, err
	}
	nowMs := uint64(q.now().UnixMilli())
	for _, it := range sortItems(kids) {
		if q.delayed && it.key > nowMs {
			break
		}
		var claimed bool
		if err := retry(ctx, q.c, func() (err error) {
			claimed, _, err = q.c.Exists(ctx, join(q.claims, it.name))
			return err
		}); err != nil {
			return nil, err
		}
		if claimed {
			continue
		}
		var data []byte
		err := retry(ctx, q.c, func() (err error) {
			data, _, err = q.c.Get(ctx, join(q.dir, it.name))
			return err
		})
		if errors.Is(err, vocab.NoNode) {
			continue
		}
		return data, err
	}
	return nil, ErrEmpty
}

// Poll takes the next item if there is one, or returns ErrEmpty.
func (q *Queue) Poll(ctx context.Context) ([]byte, error) {
	if err := q.ensure(ctx); err != nil {
		return nil, err
	}
	kids, err := children(ctx, q.c, q.dir)
	if err != nil {
		return nil, err
	}
	data, _, err := q.tryTake(ctx, kids, true)
	if err == nil && data == nil {
		return nil, ErrEmpty
	}
	return data, err
}

// Take takes the next item, waiting for one.
func (q *Queue) Take(ctx context.Context) ([]byte, error) {
	var data []byte
	err := q.block(ctx, func(kids []string) (waitInfo, bool, error) {
		d, wi, err := q.tryTake(ctx, kids, true)
		data = d
		return wi, d != nil, err
	})
	return data, err
}

// Claim is an item claimed for processing: Ack removes it for good,
// Release gives it back; if the claimer's session ends first, the item
// goes back to the queue.
type Claim struct {
	q    *Queue
	Name string // the item's node name
	Data []byte
}

// Claim claims the next item, waiting for one.
func (q *Queue) Claim(ctx context.Context) (*Claim, error) {
	var cl *Claim
	err := q.block(ctx, func(kids []string) (waitInfo, bool, error) {
		c, wi, err := q.tryClaim(ctx, kids)
		cl = c
		return wi, c != nil, err
	})
	return cl, err
}

// Ack removes the claimed item from the queue. It fails (ErrSessionLost)
// if the claim was lost with the session: the item may then be someone
// else's.
func (cl *Claim) Ack(ctx context.Context) error {
	q := cl.q
	claim, item := join(q.claims, cl.Name), join(q.dir, cl.Name)
	for {
		_, err := q.c.Multi(ctx, DeleteOp{Path: claim, Version: AnyVersion}, DeleteOp{Path: item, Version: AnyVersion})
		if !isLoss(err) {
			return lost(err)
		}
		if err := awaitConnected(ctx, q.c, 10*time.Millisecond); err != nil {
			return err
		}
		// Our claim lives as long as our session: if it is gone, the Ack
		// took effect.
		var ok bool
		if err := retry(ctx, q.c, func() (err error) {
			ok, _, err = q.c.Exists(ctx, claim)
			return err
		}); err != nil {
			return err
		}
		if !ok {
			return nil
		}
	}
}

// Release gives the claimed item back to the queue.
func (cl *Claim) Release(ctx context.Context) error {
	return lost(deleteNode(ctx, cl.q.c, join(cl.q.claims, cl.Name)))
}

// Close deletes what the queue's takes left behind (the claim node of its
// last take). The Queue stays usable.
func (q *Queue) Close(ctx context.Context) error {
	ts, _ := q.takeTombstones()
	for i, t := range ts {
		if err := deleteNode(ctx, q.c, t); err != nil {
			q.putTombstones(ts[i:], nil)
			return lost(err)
		}
	}
	return nil
}

// waitInfo says what a head taker waits for besides the queue's children:
// claims holding items back and the next due time.
type waitInfo struct {
	claimed []string
	due     uint64
}

// tryTake takes (take) the first ready, unclaimed item of kids. It
// returns nil data when there is none, with what to wait for.
func (q *Queue) tryTake(ctx context.Context, kids []string, take bool) ([]byte, waitInfo, error) {
	var wi waitInfo
	nowMs := uint64(q.now().UnixMilli())
	for _, it := range sortItems(kids) {
		if q.delayed && it.key > nowMs {
			wi.due = it.key
			break
		}
		claim, item := join(q.claims, it.name), join(q.dir, it.name)
		var data []byte
		err := retry(ctx, q.c, func() (err error) {
			data, _, err = q.c.Get(ctx, item)
			return err
		})
		if errors.Is(err, vocab.NoNode) {
			continue
		}
		if err != nil {
			return nil, wi, err
		}
		if data == nil {
			data = []byte{}
		}
		for {
			ts, ops := q.takeTombstones()
			ops = append(ops, CreateOp{Path: claim, Mode: vocab.ModeEphemeral, ACL: q.opts.acl}, DeleteOp{Path: item, Version: AnyVersion})
			_, err = q.c.Multi(ctx, ops...)
			if err == nil {
				q.addTombstone(claim)
				return data, wi, nil
			}
			if !isLoss(err) {
				if q.putTombstones(ts, err) {
					continue
				}
				break
			}
			// The answer is lost: our claim node, if there, says we took
			// the item (and deleted ts in the same multi).
			_, ours, oerr := q.owner(ctx, claim)
			if oerr != nil {
				q.putTombstones(ts, nil)
				return nil, wi, oerr
			}
			if ours {
				q.addTombstone(claim)
				return data, wi, nil
			}
			q.putTombstones(ts, nil)
			var itemLeft bool
			if err := retry(ctx, q.c, func() (err error) {
				itemLeft, _, err = q.c.Exists(ctx, item)
				return err
			}); err != nil {
				return nil, wi, err
			}
			if !itemLeft {
				err = &vocab.Error{Code: vocab.NoNode}
				break
			}
		}
		switch {
		case errors.Is(err, vocab.NodeExists):
			wi.claimed = append(wi.claimed, claim) // someone else's claim
		case errors.Is(err, vocab.NoNode):
		default:
			return nil, wi, lost(err)
		}
	}
	return nil, wi, nil
}

// Tombstones are the ephemeral nodes this queue's offers and takes leave
// behind (receipts and claims of taken items) to settle a lost answer; each
// goes in front of the queue's next multi as a delete, or at Close.

func (q *Queue) addTombstone(path string) {
	q.mu.Lock()
	q.tombstones = append(q.tombstones, path)
	q.mu.Unlock()
}

// takeTombstones removes the tombstones from the queue and returns them
// with a delete for each, to run in front of a multi.
func (q *Queue) takeTombstones() ([]string, []Op) {
	q.mu.Lock()
	ts := q.tombstones
	q.tombstones = nil
	q.mu.Unlock()
	ops := make([]Op, 0, len(ts)+2)
	for _, t := range ts {
		ops = append(ops, DeleteOp{Path: t, Version: AnyVersion})
	}
	return ts, ops
}

// putTombstones gives back tombstones that a multi which failed with err
// did not delete. A tombstone the multi failed on is not this session's
// any more (which cannot happen while the session lives): it is dropped,
// and putTombstones reports that the multi is worth trying again at once.
func (q *Queue) putTombstones(ts []string, err error) (dropped bool) {
	var fe *vocab.Error
	if errors.As(err, &fe) && slices.Contains(ts, fe.Path) {
		ts = slices.DeleteFunc(slices.Clone(ts), func(s string) bool { return s == fe.Path })
		dropped = true
	}
	q.mu.Lock()
	q.tombstones = append(q.tombstones, ts...)
	q.mu.Unlock()
	return dropped
}

// owner settles a lost answer: after the session is connected again, it
// reads whether path exists and whether this session owns it.
func (q *Queue) owner(ctx context.Context, path string) (exists, ours bool, err error) {
	if err := awaitConnected(ctx, q.c, 10*time.Millisecond); err != nil {
		return false, false, err
	}
	var st vocab.Stat
	err = retry(ctx, q.c, func() (err error) {
		exists, st, err = q.c.Exists(ctx, path)
		return err
	})
	return exists, exists && st.EphemeralOwner == q.c.SessionID(), err
}

// tryClaim claims the first ready, unclaimed item of kids.
func (q *Queue) tryClaim(ctx context.Context, kids []string) (*Claim, waitInfo, error) {
	var wi waitInfo
	nowMs := uint64(q.now().UnixMilli())
	for _, it := range sortItems(kids) {
		if q.delayed && it.key > nowMs {
			wi.due = it.key
			break
		}
		claim, item := join(q.claims, it.name), join(q.dir, it.name)
		var err error
		for {
			_, err = q.c.Multi(ctx, CheckOp{Path: item, Version: AnyVersion}, CreateOp{Path: claim, Mode: vocab.ModeEphemeral, ACL: q.opts.acl})
			if !isLoss(err) {
				break
			}
			exists, ours, oerr := q.owner(ctx, claim)
			if oerr != nil {
				return nil, wi, oerr
			}
			if exists {
				if ours {
					err = nil
				} else {
					err = &vocab.Error{Code: vocab.NodeExists}
				}
				break
			}
		}
		switch {
		case err == nil:
			var data []byte
			err := retry(ctx, q.c, func() (err error) {
				data, _, err = q.c.Get(ctx, item)
				return err
			})
			if err != nil {
				_ = deleteNode(context.WithoutCancel(ctx), q.c, claim)
				if errors.Is(err, vocab.NoNode) {
					continue
				}
				return nil, wi, lost(err)
			}
			if data == nil {
				data = []byte{}
			}
			return &Claim{q: q, Name: it.name, Data: data}, wi, nil
		case errors.Is(err, vocab.NodeExists):
			wi.claimed = append(wi.claimed, claim)
		case errors.Is(err, vocab.NoNode):
		default:
			return nil, wi, lost(err)
		}
	}
	return nil, wi, nil
}

// block runs attempt until it gets an item: first on its own, then from
// the line of takers, as its head.
func (q *Queue) block(ctx context.Context, attempt func(kids []string) (waitInfo, bool, error)) error {
	if err := q.ensure(ctx); err != nil {
		return err
	}
	kids, err := children(ctx, q.c, q.dir)
	if err != nil {
		return err
	}
	if _, ok, err := attempt(kids); ok || err != nil {
		return err
	}
	// Nothing for us: join the line.
	path, prefix, err := createProtected(ctx, q.c, q.takers, "t-", nil, vocab.ModeEphemeralSequential, q.opts.acl)
	if err != nil {
		if !sessionEnded(err) {
			deleteProtected(q.c, q.takers, prefix, "")
		}
		return err
	}
	defer deleteProtected(q.c, q.takers, prefix, path)
	own := baseName(path)
	for {
		line, err := children(ctx, q.c, q.takers)
		if err != nil {
			return err
		}
		nodes := sortSeq(line, "t-")
		i := indexOf(nodes, own)
		if i < 0 {
			if st, _ := q.c.State(); !st.Live() {
				return sessionErr(st)
			}
			return fmt.Errorf("%w: %s", ErrNodeVanished, path)
		}
		if i > 0 {
			if err := waitGone(ctx, q.c, join(q.takers, nodes[i-1].name)); err != nil {
				return err
			}
			continue
		}
		// Head of the line: watch the queue.
		var w <-chan Event
		err = retry(ctx, q.c, func() (err error) {
			kids, _, w, err = q.c.ChildrenW(ctx, q.dir)
			return err
		})
		if err != nil {
			return err
		}
		wi, ok, err := attempt(kids)
		if ok || err != nil {
			return err
		}
		if err := q.waitHead(ctx, w, wi); err != nil {
			return err
		}
	}
}

// waitHead waits, as the head taker, for the queue to change, for a claim
// holding an item back to go, or for the next due time.
func (q *Queue) waitHead(ctx context.Context, w <-chan Event, wi waitInfo) error {
	chans := []<-chan Event{w}
	for _, claim := range wi.claimed {
		var cw <-chan Event
		err := retry(ctx, q.c, func() (err error) {
			_, _, cw, err = q.c.GetW(ctx, claim)
			return err
		})
		if errors.Is(err, vocab.NoNode) {
			return nil // gone already: look again
		}
		if err != nil {
			return err
		}
		chans = append(chans, cw)
	}
	var timer <-chan time.Time
	if wi.due != 0 {
		t := time.NewTimer(time.Until(time.UnixMilli(int64(wi.due))) + time.Millisecond)
		defer t.Stop()
		timer = t.C
	}
	for {
		st, changed := q.c.State()
		if !st.Live() {
			return sessionErr(st)
		}
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(changed)},
		}
		if timer != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer)})
		}
		for _, ch := range chans {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		chosen, _, _ := reflect.Select(cases)
		switch {
		case chosen == 0:
			return ctx.Err()
		case chosen == 1:
			continue // re-check the session
		}
		return nil
	}
}
