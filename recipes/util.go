package recipes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"coord/vocab"
)

// Option configures a recipe.
type Option func(*options)

type options struct {
	acl       []vocab.ACL
	data      []byte
	logger    *slog.Logger
	revocable bool
}

func buildOptions(opts []Option) options {
	o := options{acl: vocab.OpenACLUnsafe, logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithACL sets the ACL of the znodes a recipe creates (default
// vocab.OpenACLUnsafe).
func WithACL(acl []vocab.ACL) Option { return func(o *options) { o.acl = acl } }

// WithData sets the data of a recipe's own znode: a lock holder's, a
// candidate's or a member's identity, which others can read.
func WithData(data []byte) Option { return func(o *options) { o.data = data } }

// WithLogger routes a recipe's logs to l (default: none).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// sessionErr is the error for a session in a terminal state.
func sessionErr(st SessionState) error {
	if st == StateClosed {
		return fmt.Errorf("%w: %w", ErrSessionLost, ErrClosed)
	}
	return fmt.Errorf("%w: %w", ErrSessionLost, vocab.SessionExpired)
}

// sessionEnded reports whether err says the session is over.
func sessionEnded(err error) bool {
	return errors.Is(err, vocab.SessionExpired) || errors.Is(err, ErrClosed) || errors.Is(err, ErrSessionLost)
}

// lost turns an error that says the session is over into one that also
// matches ErrSessionLost; other errors pass unchanged.
func lost(err error) error {
	if err == nil || errors.Is(err, ErrSessionLost) || !sessionEnded(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrSessionLost, err)
}

// isLoss reports whether err leaves the outcome of a call unknown while the
// session may live on.
func isLoss(err error) bool { return errors.Is(err, vocab.ConnectionLoss) }

// awaitConnected waits, after a ConnectionLoss, until the session is
// connected again (or backoff passes if it still looks connected: the
// state may lag behind the loss). It fails when the session ends or ctx
// does.
func awaitConnected(ctx context.Context, c Conn, backoff time.Duration) error {
	st, changed := c.State()
	if !st.Live() {
		return sessionErr(st)
	}
	var timer <-chan time.Time
	if st != StateSuspended {
		t := time.NewTimer(backoff)
		defer t.Stop()
		timer = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer:
			return nil
		case <-changed:
			st, changed = c.State()
			if !st.Live() {
				return sessionErr(st)
			}
			if st != StateSuspended {
				return nil
			}
		}
	}
}

// retry runs op until it ends in something other than ConnectionLoss,
// waiting for the session to come back between attempts. op must be safe to
// repeat (a read, or a write whose repetition is detected).
func retry(ctx context.Context, c Conn, op func() error) error {
	backoff := 5 * time.Millisecond
	for {
		err := op()
		if !isLoss(err) || ctx.Err() != nil {
			return lost(err)
		}
		if err := awaitConnected(ctx, c, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// waitWatch waits for a one-shot watch to fire. A suspension does not end
// the wait (the watch survives a change of server); the end of the session
// or of ctx does.
func waitWatch(ctx context.Context, c Conn, w <-chan Event) error {
	for {
		st, changed := c.State()
		if !st.Live() {
			return sessionErr(st)
		}
		select {
		case ev, ok := <-w:
			if !ok || ev.Type == EventNotWatching {
				st, _ := c.State()
				if !st.Live() {
					return sessionErr(st)
				}
				return nil // removed: the caller re-reads
			}
			return nil
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// cleanupCtx bounds the clean-up a recipe does after its caller gave up
// (deleting a node it created): not the caller's context, which has ended.
func cleanupCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// ensurePath creates path and its missing ancestors as persistent znodes
// with no data.
func ensurePath(ctx context.Context, c Conn, path string, acl []vocab.ACL) error {
	if path == "/" || path == "" {
		return nil
	}
	err := retry(ctx, c, func() error {
		_, err := c.Create(ctx, path, nil, vocab.ModePersistent, acl)
		return err
	})
	switch {
	case err == nil, errors.Is(err, vocab.NodeExists):
		return nil
	case !errors.Is(err, vocab.NoNode):
		return err
	}
	if err := ensurePath(ctx, c, parentOf(path), acl); err != nil {
		return err
	}
	err = retry(ctx, c, func() error {
		_, err := c.Create(ctx, path, nil, vocab.ModePersistent, acl)
		return err
	})
	if errors.Is(err, vocab.NodeExists) {
		return nil
	}
	return err
}

func parentOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

func baseName(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

// newGUID is a random id that makes a node name unique to one create
// (Curator's protected mode).
func newGUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// protectedPrefix is the name prefix that lets a session find a node it
// created whose create answer it lost.
func protectedPrefix(guid string) string { return "_c_" + guid + "-" }

// createProtected creates dir/_c_<guid>-<label> (sequential modes append the
// sequence). When the answer is lost (ConnectionLoss) it looks for the node
// by its guid once the session is back, so a retried create never leaves a
// second node behind. It returns the path and the prefix (for
// deleteProtected).
func createProtected(ctx context.Context, c Conn, dir, label string, data []byte, mode vocab.CreateMode, acl []vocab.ACL) (string, string, error) {
	prefix := protectedPrefix(newGUID())
	backoff := 5 * time.Millisecond
	for {
		p, err := c.Create(ctx, join(dir, prefix+label), data, mode, acl)
		if err == nil {
			return p, prefix, nil
		}
		if !isLoss(err) {
			return "", prefix, lost(err)
		}
		if err := awaitConnected(ctx, c, backoff); err != nil {
			return "", prefix, err
		}
		backoff = min(2*backoff, 500*time.Millisecond)
		p, err = findProtected(ctx, c, dir, prefix)
		if err != nil {
			return "", prefix, err
		}
		if p != "" {
			return p, prefix, nil
		}
	}
}

func findProtected(ctx context.Context, c Conn, dir, prefix string) (string, error) {
	var kids []string
	err := retry(ctx, c, func() (err error) {
		kids, _, err = c.Children(ctx, dir)
		return err
	})
	if err != nil {
		return "", err
	}
	for _, k := range kids {
		if strings.HasPrefix(k, prefix) {
			return join(dir, k), nil
		}
	}
	return "", nil
}

// deleteProtected removes the node a createProtected that failed may have
// left behind (its answer lost, or its caller gone), on its own bounded
// context. A session that ended took the node with it.
func deleteProtected(c Conn, dir, prefix, path string) {
	ctx, cancel := cleanupCtx()
	defer cancel()
	if path == "" {
		p, err := findProtected(ctx, c, dir, prefix)
		if err != nil || p == "" {
			return
		}
		path = p
	}
	_ = deleteNode(ctx, c, path)
}

// deleteNode deletes path, retrying on connection loss; a node already
// gone is not an error.
func deleteNode(ctx context.Context, c Conn, path string) error {
	err := retry(ctx, c, func() error { return c.Delete(ctx, path, AnyVersion) })
	if errors.Is(err, vocab.NoNode) {
		return nil
	}
	return err
}

// seqNode is a sequential child: its name and its sequence number.
type seqNode struct {
	name  string
	label string
	seq   uint32
}

// seqOf parses the sequence number that the server appended to a node
// created as <anything><label>. ZooKeeper formats the parent's cversion, a
// signed 32-bit counter, as %010d, so after 2^31 creates the names go
// negative ("-2147483648") and compare wrongly as strings; read as an
// unsigned 32-bit number they keep their creation order.
func seqOf(name, label string) (uint32, bool) {
	i := strings.LastIndex(name, label)
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[i+len(label):], 10, 64)
	if err != nil || n < math.MinInt32 || n > math.MaxInt32 {
		return 0, false
	}
	return uint32(int32(n)), true
}

// sortSeq keeps the children that carry one of labels, in sequence order.
func sortSeq(children []string, labels ...string) []seqNode {
	out := make([]seqNode, 0, len(children))
	for _, k := range children {
		for _, l := range labels {
			if s, ok := seqOf(k, l); ok {
				out = append(out, seqNode{name: k, label: l, seq: s})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b seqNode) int {
		if a.seq != b.seq {
			if a.seq < b.seq {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

func indexOf(nodes []seqNode, name string) int {
	for i, n := range nodes {
		if n.name == name {
			return i
		}
	}
	return -1
}

// children reads dir's children, retrying on connection loss.
func children(ctx context.Context, c Conn, dir string) ([]string, error) {
	var kids []string
	err := retry(ctx, c, func() (err error) {
		kids, _, err = c.Children(ctx, dir)
		return err
	})
	return kids, err
}

// waitGone waits until path no longer exists (herd-free waits watch one
// node each). It returns at once if path is gone already.
func waitGone(ctx context.Context, c Conn, path string) error {
	for {
		var w <-chan Event
		err := retry(ctx, c, func() (err error) {
			_, _, w, err = c.GetW(ctx, path)
			return err
		})
		if errors.Is(err, vocab.NoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := waitWatch(ctx, c, w); err != nil {
			return err
		}
	}
}
