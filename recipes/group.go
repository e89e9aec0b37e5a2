package recipes

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"coord/vocab"
)

// Group is a membership group / service registry: each member is an
// ephemeral znode dir/<name> whose data describes it (an address, say).
// A member stays while its session lives and vanishes when the session
// ends, so a crashed member leaves the group by itself after its session
// timeout. Watch keeps a cached member list current.
//
// While a member's session is suspended the member stays (its node lives
// until the session expires); after expiry it is gone and Join must be
// called again on a new session.
type Group struct {
	c    Conn
	dir  string
	opts options
}

// Member is this session's membership in a Group.
type Member struct {
	c    Conn
	path string
}

// NewGroup returns the group on directory dir.
func NewGroup(c Conn, dir string, opts ...Option) *Group {
	return &Group{c: c, dir: dir, opts: buildOptions(opts)}
}

// Join adds a member named name with data. A name already taken by another
// live session is a NodeExists error.
func (g *Group) Join(ctx context.Context, name string, data []byte) (*Member, error) {
	if err := ensurePath(ctx, g.c, g.dir, g.opts.acl); err != nil {
		return nil, err
	}
	path := join(g.dir, name)
	for {
		_, err := g.c.Create(ctx, path, data, vocab.ModeEphemeral, g.opts.acl)
		if err == nil {
			return &Member{c: g.c, path: path}, nil
		}
		if errors.Is(err, vocab.NodeExists) || isLoss(err) {
			if isLoss(err) {
				if err := awaitConnected(ctx, g.c, 10*time.Millisecond); err != nil {
					return nil, err
				}
			}
			// Ours, if the create whose answer was lost went through.
			var ok bool
			var st vocab.Stat
			if err := retry(ctx, g.c, func() (err error) {
				ok, st, err = g.c.Exists(ctx, path)
				return err
			}); err != nil {
				return nil, err
			}
			if ok && st.EphemeralOwner == g.c.SessionID() {
				return &Member{c: g.c, path: path}, nil
			}
			if ok {
				return nil, &vocab.Error{Code: vocab.NodeExists, Op: "join", Path: path}
			}
			continue
		}
		return nil, lost(err)
	}
}

// Leave removes the member.
func (m *Member) Leave(ctx context.Context) error { return lost(deleteNode(ctx, m.c, m.path)) }

// Update replaces the member's data.
func (m *Member) Update(ctx context.Context, data []byte) error {
	return lost(retry(ctx, m.c, func() error {
		_, err := m.c.Set(ctx, m.path, data, AnyVersion)
		return err
	}))
}

// Members reads the group once: member name to data.
func (g *Group) Members(ctx context.Context) (map[string][]byte, error) {
	kids, err := children(ctx, g.c, g.dir)
	if errors.Is(err, vocab.NoNode) {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(kids))
	for _, k := range kids {
		var data []byte
		err := retry(ctx, g.c, func() (err error) {
			data, _, err = g.c.Get(ctx, join(g.dir, k))
			return err
		})
		if errors.Is(err, vocab.NoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[k] = data
	}
	return out, nil
}

// GroupWatch is a cached, watched member list of a Group (a TreeCache one
// level deep).
type GroupWatch struct{ t *TreeCache }

// Watch starts following the group's members.
func (g *Group) Watch(ctx context.Context) (*GroupWatch, error) {
	if err := ensurePath(ctx, g.c, g.dir, g.opts.acl); err != nil {
		return nil, err
	}
	t, err := NewTreeCache(ctx, g.c, g.dir, WithDepth(1))
	if err != nil {
		return nil, err
	}
	return &GroupWatch{t: t}, nil
}

// Members returns the cached members: name to data.
func (w *GroupWatch) Members() map[string][]byte {
	out := map[string][]byte{}
	for _, k := range w.t.Children(w.t.path) {
		if d, _, ok := w.t.Get(join(w.t.path, k)); ok {
			out[k] = d
		}
	}
	return out
}

// Changed returns a channel closed at the next change of the list.
func (w *GroupWatch) Changed() <-chan struct{} { return w.t.Changed() }

// Err says why the watch stopped (nil while it runs).
func (w *GroupWatch) Err() error { return w.t.Err() }

// Close stops following the group.
func (w *GroupWatch) Close(ctx context.Context) error { return w.t.Close(ctx) }

// WatchConfig follows a configuration znode: a NodeCache whose Current is
// the configuration and whose Changed fires on every update.
func WatchConfig(ctx context.Context, c Conn, path string) (*NodeCache, error) {
	return NewNodeCache(ctx, c, path)
}

// ConfigUpdate is one node's change in UpdateConfig: its new data, if its
// version is still Version (AnyVersion: whatever it is).
type ConfigUpdate struct {
	Path    string
	Data    []byte
	Version int32
}

// UpdateConfig changes several configuration nodes atomically (one multi):
// all or none, so readers never see half an update. A node changed by
// someone else since the version given fails the whole update with
// BadVersion.
func UpdateConfig(ctx context.Context, c Conn, updates ...ConfigUpdate) error {
	ops := make([]Op, len(updates))
	for i, u := range updates {
		ops[i] = SetDataOp{Path: u.Path, Data: u.Data, Version: u.Version}
	}
	_, err := c.Multi(ctx, ops...)
	return lost(err)
}

// NameService hands out unique names (ZooKeeper's naming recipe): each
// Register creates a persistent-sequential znode dir/<base>-<n> whose data
// is the name's value. Names are never reused; they stay until
// Unregister, whatever happens to the session that made them. A Register
// whose answer is lost with the connection finds its name instead of
// taking a second one.
type NameService struct {
	c    Conn
	dir  string
	opts options
}

// NewNameService returns the name service on directory dir.
func NewNameService(c Conn, dir string, opts ...Option) *NameService {
	return &NameService{c: c, dir: dir, opts: buildOptions(opts)}
}

// Register takes a new unique name starting with base and binds data to it.
func (s *NameService) Register(ctx context.Context, base string, data []byte) (string, error) {
	if err := ensurePath(ctx, s.c, s.dir, s.opts.acl); err != nil {
		return "", err
	}
	path, _, err := createProtected(ctx, s.c, s.dir, base+"-", data, vocab.ModePersistentSequential, s.opts.acl)
	if err != nil {
		return "", err
	}
	return baseName(path), nil
}

// Resolve returns the data bound to name.
func (s *NameService) Resolve(ctx context.Context, name string) ([]byte, error) {
	var data []byte
	err := retry(ctx, s.c, func() (err error) {
		data, _, err = s.c.Get(ctx, join(s.dir, name))
		return err
	})
	return data, err
}

// Unregister releases name.
func (s *NameService) Unregister(ctx context.Context, name string) error {
	return deleteNode(ctx, s.c, join(s.dir, name))
}

// Counter is a shared 64-bit counter in one znode (decimal text), updated
// by compare-and-set on the node's version and retried when another client
// got there first (Curator's DistributedAtomicLong, optimistic mode). It
// lives in a persistent node, independent of sessions; an Add whose answer
// is lost with the connection is not retried (its effect is unknown) and
// returns the ConnectionLoss.
type Counter struct {
	c    Conn
	path string
	opts options
}

// NewCounter returns the counter at path (created at 0 when first used).
func NewCounter(c Conn, path string, opts ...Option) *Counter {
	return &Counter{c: c, path: path, opts: buildOptions(opts)}
}

// Value reads the counter.
func (k *Counter) Value(ctx context.Context) (int64, error) {
	v, _, err := k.read(ctx)
	return v, err
}

func (k *Counter) read(ctx context.Context) (int64, int32, error) {
	var data []byte
	var st vocab.Stat
	err := retry(ctx, k.c, func() (err error) {
		data, st, err = k.c.Get(ctx, k.path)
		return err
	})
	if errors.Is(err, vocab.NoNode) {
		if err := ensurePath(ctx, k.c, parentOf(k.path), k.opts.acl); err != nil {
			return 0, 0, err
		}
		err = retry(ctx, k.c, func() error {
			_, err := k.c.Create(ctx, k.path, []byte("0"), vocab.ModePersistent, k.opts.acl)
			return err
		})
		if err != nil && !errors.Is(err, vocab.NodeExists) {
			return 0, 0, err
		}
		return k.read(ctx)
	}
	if err != nil {
		return 0, 0, err
	}
	if len(data) == 0 {
		return 0, st.Version, nil
	}
	v, perr := strconv.ParseInt(string(data), 10, 64)
	if perr != nil {
		return 0, 0, fmt.Errorf("recipes: counter %s holds %q: %w", k.path, data, perr)
	}
	return v, st.Version, nil
}

// Add adds delta and returns the new value.
func (k *Counter) Add(ctx context.Context, delta int64) (int64, error) {
	backoff := time.Millisecond
	for {
		v, version, err := k.read(ctx)
		if err != nil {
			return 0, err
		}
		nv := v + delta
		_, err = k.c.Set(ctx, k.path, []byte(strconv.FormatInt(nv, 10)), version)
		if err == nil {
			return nv, nil
		}
		if !errors.Is(err, vocab.BadVersion) {
			return 0, lost(err)
		}
		// Lost the race: back off a little, randomly, so that contending
		// clients spread out instead of colliding again.
		t := time.NewTimer(rand.N(backoff) + time.Microsecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
		backoff = min(2*backoff, 50*time.Millisecond)
	}
}
