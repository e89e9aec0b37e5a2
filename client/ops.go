package client

import (
	"context"
	"fmt"
	"time"

	"coord/api"
	"coord/vocab"
)

// Create makes a znode and returns its path (with the sequence suffix for
// sequential modes). nil data is ZooKeeper's null data, apart from empty
// data. For TTL modes use CreateTTL.
func (c *Conn) Create(ctx context.Context, path string, data []byte, mode vocab.CreateMode, acl []vocab.ACL) (string, error) {
	p, _, err := c.create(ctx, "create", createToAPI(path, data, mode, acl, 0))
	return p, err
}

// Create2 is Create that also returns the new znode's Stat.
func (c *Conn) Create2(ctx context.Context, path string, data []byte, mode vocab.CreateMode, acl []vocab.ACL) (string, vocab.Stat, error) {
	return c.create(ctx, "create", createToAPI(path, data, mode, acl, 0))
}

// CreateTTL makes a TTL znode (mode vocab.ModePersistentTTL or
// vocab.ModePersistentSequentialTTL) that the server deletes once it has had no
// children and no change for ttl.
func (c *Conn) CreateTTL(ctx context.Context, path string, data []byte, mode vocab.CreateMode, acl []vocab.ACL, ttl time.Duration) (string, vocab.Stat, error) {
	return c.create(ctx, "create", createToAPI(path, data, mode, acl, ttl.Milliseconds()))
}

func (c *Conn) create(ctx context.Context, op string, req *api.CreateRequest) (string, vocab.Stat, error) {
	r, err := c.do(ctx, op, req.GetPath(), &api.Request{Op: &api.Request_Create{Create: req}}, nil)
	if err != nil {
		return "", vocab.Stat{}, err
	}
	cr := r.GetCreate()
	return cr.GetPath(), api.StatFromAPI(cr.GetStat()), nil
}

// Delete removes the znode at path if its version matches (AnyVersion
// matches any).
func (c *Conn) Delete(ctx context.Context, path string, version int32) error {
	req := &api.Request{Op: &api.Request_Delete{Delete: &api.DeleteRequest{Path: path, Version: version}}}
	_, err := c.do(ctx, "delete", path, req, nil)
	return err
}

// Exists reports whether path exists, with its Stat if it does. A missing
// node is not an error.
func (c *Conn) Exists(ctx context.Context, path string) (bool, vocab.Stat, error) {
	ok, st, _, err := c.exists(ctx, path, nil)
	return ok, st, err
}

// ExistsW is Exists that also sets a one-shot watch: it fires NodeCreated
// if the node is missing, else NodeDataChanged or NodeDeleted.
func (c *Conn) ExistsW(ctx context.Context, path string) (bool, vocab.Stat, <-chan Event, error) {
	return c.exists(ctx, path, newOneShot())
}

func (c *Conn) exists(ctx context.Context, path string, w *watcher) (bool, vocab.Stat, <-chan Event, error) {
	req := &api.Request{Op: &api.Request_Exists{Exists: &api.ExistsRequest{Path: path, Watch: w != nil}}}
	var onResp func(*api.Response)
	if w != nil {
		onResp = func(r *api.Response) {
			switch {
			case vocab.Code(r.GetErr()) == vocab.NoNode, r.GetErr() == 0 && r.GetStat().GetStat() == nil:
				c.watches.add(path, kindExist, w)
			case r.GetErr() == 0:
				c.watches.add(path, kindData, w)
			}
		}
	}
	r, err := c.do(ctx, "exists", path, req, onResp)
	if vocab.CodeOf(err) == vocab.NoNode {
		return false, vocab.Stat{}, w.ch(), nil
	}
	if err != nil {
		return false, vocab.Stat{}, nil, err
	}
	st := r.GetStat().GetStat()
	if st == nil {
		return false, vocab.Stat{}, w.ch(), nil
	}
	return true, api.StatFromAPI(st), w.ch(), nil
}

// Get returns the data and Stat of the znode at path. Null data is nil;
// empty data is a non-nil empty slice.
func (c *Conn) Get(ctx context.Context, path string) ([]byte, vocab.Stat, error) {
	data, st, _, err := c.get(ctx, path, nil)
	return data, st, err
}

// GetKind is Get that also reports the node's kind where its Stat cannot:
// for a container or a TTL node, its stored owner in ZooKeeper's encoding
// (math.MinInt64 for a container, 0xFF<<56|ttl for a TTL node); 0 for any
// other node. Stat's EphemeralOwner shows those nodes as 0, as ZooKeeper's
// does.
func (c *Conn) GetKind(ctx context.Context, path string) ([]byte, vocab.Stat, int64, error) {
	req := &api.Request{Op: &api.Request_GetData{GetData: &api.GetDataRequest{Path: path}}}
	r, err := c.do(ctx, "get", path, req, nil)
	if err != nil {
		return nil, vocab.Stat{}, 0, err
	}
	g := r.GetGetData()
	return api.DataFromAPI(g.GetData(), g.GetNullData()), api.StatFromAPI(g.GetStat()), g.GetKindOwner(), nil
}

// GetW is Get that also sets a one-shot watch on the node's data: it fires
// NodeDataChanged or NodeDeleted.
func (c *Conn) GetW(ctx context.Context, path string) ([]byte, vocab.Stat, <-chan Event, error) {
	return c.get(ctx, path, newOneShot())
}

func (c *Conn) get(ctx context.Context, path string, w *watcher) ([]byte, vocab.Stat, <-chan Event, error) {
	req := &api.Request{Op: &api.Request_GetData{GetData: &api.GetDataRequest{Path: path, Watch: w != nil}}}
	r, err := c.do(ctx, "get", path, req, registerOnOK(c, path, kindData, w))
	if err != nil {
		return nil, vocab.Stat{}, nil, err
	}
	g := r.GetGetData()
	return api.DataFromAPI(g.GetData(), g.GetNullData()), api.StatFromAPI(g.GetStat()), w.ch(), nil
}

// registerOnOK registers w for path once the response says OK.
func registerOnOK(c *Conn, path string, kind watchKind, w *watcher) func(*api.Response) {
	if w == nil {
		return nil
	}
	return func(r *api.Response) {
		if r.GetErr() == 0 {
			c.watches.add(path, kind, w)
		}
	}
}

// Set replaces the data of the znode at path if its version matches, and
// returns the new Stat.
func (c *Conn) Set(ctx context.Context, path string, data []byte, version int32) (vocab.Stat, error) {
	req := &api.Request{Op: &api.Request_SetData{SetData: setDataToAPI(path, data, version)}}
	r, err := c.do(ctx, "set", path, req, nil)
	if err != nil {
		return vocab.Stat{}, err
	}
	return api.StatFromAPI(r.GetStat().GetStat()), nil
}

// Children returns the names of the children of path, in the server's order,
// and the node's Stat.
func (c *Conn) Children(ctx context.Context, path string) ([]string, vocab.Stat, error) {
	ch, st, _, err := c.children(ctx, path, nil)
	return ch, st, err
}

// ChildrenW is Children that also sets a one-shot child watch: it fires
// NodeChildrenChanged or NodeDeleted.
func (c *Conn) ChildrenW(ctx context.Context, path string) ([]string, vocab.Stat, <-chan Event, error) {
	return c.children(ctx, path, newOneShot())
}

func (c *Conn) children(ctx context.Context, path string, w *watcher) ([]string, vocab.Stat, <-chan Event, error) {
	req := &api.Request{Op: &api.Request_GetChildren{GetChildren: &api.GetChildrenRequest{Path: path, Watch: w != nil}}}
	r, err := c.do(ctx, "children", path, req, registerOnOK(c, path, kindChild, w))
	if err != nil {
		return nil, vocab.Stat{}, nil, err
	}
	g := r.GetGetChildren()
	return g.GetChildren(), api.StatFromAPI(g.GetStat()), w.ch(), nil
}

// GetACL returns the ACL of the znode at path and its Stat.
func (c *Conn) GetACL(ctx context.Context, path string) ([]vocab.ACL, vocab.Stat, error) {
	req := &api.Request{Op: &api.Request_GetAcl{GetAcl: &api.GetACLRequest{Path: path}}}
	r, err := c.do(ctx, "getACL", path, req, nil)
	if err != nil {
		return nil, vocab.Stat{}, err
	}
	g := r.GetGetAcl()
	return api.ACLFromAPI(g.GetAcl()), api.StatFromAPI(g.GetStat()), nil
}

// SetACL replaces the ACL of the znode at path if its ACL version
// (aversion) matches, and returns the new Stat.
func (c *Conn) SetACL(ctx context.Context, path string, acl []vocab.ACL, version int32) (vocab.Stat, error) {
	req := &api.Request{Op: &api.Request_SetAcl{SetAcl: &api.SetACLRequest{Path: path, Acl: api.ACLToAPI(acl), Version: version}}}
	r, err := c.do(ctx, "setACL", path, req, nil)
	if err != nil {
		return vocab.Stat{}, err
	}
	return api.StatFromAPI(r.GetStat().GetStat()), nil
}

// Sync waits until the server the session is on has applied everything the
// leader had committed when it asked, so that the session's next read sees
// at least that state.
func (c *Conn) Sync(ctx context.Context, path string) (string, error) {
	req := &api.Request{Op: &api.Request_Sync{Sync: &api.SyncRequest{Path: path}}}
	r, err := c.do(ctx, "sync", path, req, nil)
	if err != nil {
		return "", err
	}
	return r.GetSync().GetPath(), nil
}

// GetAllChildrenNumber counts the descendants of path.
func (c *Conn) GetAllChildrenNumber(ctx context.Context, path string) (int32, error) {
	req := &api.Request{Op: &api.Request_GetAllChildrenNumber{GetAllChildrenNumber: &api.GetAllChildrenNumberRequest{Path: path}}}
	r, err := c.do(ctx, "getAllChildrenNumber", path, req, nil)
	if err != nil {
		return 0, err
	}
	return r.GetCount().GetCount(), nil
}

// GetEphemerals lists the session's ephemeral znodes whose paths start with
// prefix ("/" or "" for all).
func (c *Conn) GetEphemerals(ctx context.Context, prefix string) ([]string, error) {
	req := &api.Request{Op: &api.Request_GetEphemerals{GetEphemerals: &api.GetEphemeralsRequest{Prefix: prefix}}}
	r, err := c.do(ctx, "getEphemerals", prefix, req, nil)
	if err != nil {
		return nil, err
	}
	return r.GetPaths().GetPaths(), nil
}

// AddAuth adds an identity to the session (for "digest", auth is
// "user:password"). The client presents it again whenever it re-attaches.
func (c *Conn) AddAuth(ctx context.Context, scheme string, auth []byte) error {
	req := &api.Request{Op: &api.Request_Auth{Auth: &api.AuthRequest{Scheme: scheme, Auth: auth}}}
	cred := authCred{scheme: scheme, auth: append([]byte(nil), auth...)}
	_, err := c.do(ctx, "auth", "", req, func(r *api.Response) {
		if r.GetErr() == 0 {
			c.mu.Lock()
			c.auth = append(c.auth, cred)
			c.mu.Unlock()
		}
	})
	return err
}

// AddWatch sets a persistent watch on path, recursive or not, and returns
// its channel: every change it matches arrives there until RemoveWatches
// removes it or the session ends (see Event). The channel buffers without
// bound so the session never waits for its reader; read it until it closes. A persistent watch fires for
// NodeCreated, NodeDataChanged, NodeDeleted and NodeChildrenChanged on path;
// a recursive one for all but NodeChildrenChanged, on path and every
// descendant.
func (c *Conn) AddWatch(ctx context.Context, path string, recursive bool) (<-chan Event, error) {
	mode, kind := int32(0), kindPersistent
	if recursive {
		mode, kind = 1, kindRecursive
	}
	w := &watcher{q: newQueue()}
	req := &api.Request{Op: &api.Request_AddWatch{AddWatch: &api.AddWatchRequest{Path: path, Mode: mode}}}
	if _, err := c.do(ctx, "addWatch", path, req, registerOnOK(c, path, kind, w)); err != nil {
		w.q.discard() // registered only when the call succeeds
		return nil, err
	}
	return w.ch(), nil
}

// RemoveWatches removes the session's watches of the kinds which selects on
// path, on the server and here: each of their channels gets EventNotWatching
// and closes. The server answers vocab.NoWatcher when there was none.
func (c *Conn) RemoveWatches(ctx context.Context, path string, which vocab.WatcherType) error {
	req := &api.Request{Op: &api.Request_RemoveWatches{RemoveWatches: &api.RemoveWatchesRequest{Path: path, Type: int32(which)}}}
	_, err := c.do(ctx, "removeWatches", path, req, func(r *api.Response) {
		code := vocab.Code(r.GetErr())
		if code == vocab.OK || code == vocab.NoWatcher {
			c.watches.remove(path, which, fmt.Errorf("coord: watch on %s removed", path))
		}
	})
	return err
}

// CheckWatches asks the server whether the session holds watches of the
// kinds which selects on path; it answers vocab.NoWatcher if not.
func (c *Conn) CheckWatches(ctx context.Context, path string, which vocab.WatcherType) error {
	req := &api.Request{Op: &api.Request_CheckWatches{CheckWatches: &api.CheckWatchesRequest{Path: path, Type: int32(which)}}}
	_, err := c.do(ctx, "checkWatches", path, req, nil)
	return err
}
