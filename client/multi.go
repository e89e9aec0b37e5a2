package client

import (
	"context"
	"errors"
	"time"

	"coord/api"
	"coord/vocab"
)

// Op is one operation of a Multi: CreateOp, DeleteOp, SetDataOp or CheckOp.
type Op interface {
	multiOp() *api.MultiOp
	opPath() string
}

// CreateOp creates a znode, as Create (TTL only for TTL modes).
type CreateOp struct {
	Path string
	Data []byte
	Mode vocab.CreateMode
	ACL  []vocab.ACL
	TTL  time.Duration
}

// DeleteOp deletes a znode, as Delete.
type DeleteOp struct {
	Path    string
	Version int32
}

// SetDataOp sets a znode's data, as Set.
type SetDataOp struct {
	Path    string
	Data    []byte
	Version int32
}

// CheckOp fails the Multi unless the znode's version matches.
type CheckOp struct {
	Path    string
	Version int32
}

func (o CreateOp) multiOp() *api.MultiOp {
	return &api.MultiOp{Op: &api.MultiOp_Create{Create: createToAPI(o.Path, o.Data, o.Mode, o.ACL, o.TTL.Milliseconds())}}
}

func (o DeleteOp) multiOp() *api.MultiOp {
	return &api.MultiOp{Op: &api.MultiOp_Delete{Delete: &api.DeleteRequest{Path: o.Path, Version: o.Version}}}
}

func (o SetDataOp) multiOp() *api.MultiOp {
	return &api.MultiOp{Op: &api.MultiOp_SetData{SetData: setDataToAPI(o.Path, o.Data, o.Version)}}
}

func (o CheckOp) multiOp() *api.MultiOp {
	return &api.MultiOp{Op: &api.MultiOp_Check{Check: &api.CheckRequest{Path: o.Path, Version: o.Version}}}
}

func (o CreateOp) opPath() string  { return o.Path }
func (o DeleteOp) opPath() string  { return o.Path }
func (o SetDataOp) opPath() string { return o.Path }
func (o CheckOp) opPath() string   { return o.Path }

// OpResult is the outcome of one operation of a Multi. Err is nil for an
// operation that took effect; when the Multi failed, the operation that
// failed carries its error and the others vocab.RuntimeInconsistency (later
// ones) or nil (earlier ones, rolled back), as in ZooKeeper.
type OpResult struct {
	Err  error
	Path string     // CreateOp: the created path
	Stat vocab.Stat // CreateOp, SetDataOp
}

// Multi applies ops atomically: all of them or none. On failure it returns
// the per-operation results, when the server sent them, and a *vocab.Error
// for the first operation that failed (its path is that operation's).
func (c *Conn) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	req := &api.MultiRequest{Ops: make([]*api.MultiOp, len(ops))}
	for i, o := range ops {
		req.Ops[i] = o.multiOp()
	}
	r, err := c.do(ctx, "multi", "", &api.Request{Op: &api.Request_Multi{Multi: req}}, nil)
	var fe *vocab.Error
	if err != nil && !errors.As(err, &fe) {
		return nil, err // not an answer from the server
	}
	res := r.GetMulti().GetResults()
	out := make([]OpResult, len(res))
	for i, m := range res {
		path := ""
		if i < len(ops) {
			path = ops[i].opPath()
		}
		out[i] = OpResult{Err: codeErr(m.GetErr(), "multi", path), Path: m.GetPath(), Stat: api.StatFromAPI(m.GetStat())}
	}
	if err == nil {
		return out, nil
	}
	fe.Path = r.GetErrPath()
	for i, o := range out {
		if o.Err != nil && vocab.CodeOf(o.Err) != vocab.RuntimeInconsistency {
			fe.Code, fe.Path = vocab.CodeOf(o.Err), ops[i].opPath()
			break
		}
	}
	return out, fe
}

// ReadOp is one read of a MultiRead; make it with GetDataOp or
// GetChildrenOp.
type ReadOp struct {
	path     string
	children bool
}

// GetDataOp reads a znode's data and Stat in a MultiRead.
func GetDataOp(path string) ReadOp { return ReadOp{path: path} }

// GetChildrenOp reads a znode's children in a MultiRead.
func GetChildrenOp(path string) ReadOp { return ReadOp{path: path, children: true} }

// ReadResult is the outcome of one ReadOp: Err, or Data and Stat
// (GetDataOp), or Children (GetChildrenOp).
type ReadResult struct {
	Err      error
	Data     []byte
	Stat     vocab.Stat
	Children []string
}

// MultiRead runs reads against one view of the tree and returns their
// results in order; unlike Multi, each read fails or succeeds on its own.
func (c *Conn) MultiRead(ctx context.Context, ops ...ReadOp) ([]ReadResult, error) {
	req := &api.MultiReadRequest{Ops: make([]*api.MultiReadOp, len(ops))}
	for i, o := range ops {
		if o.children {
			req.Ops[i] = &api.MultiReadOp{Op: &api.MultiReadOp_GetChildren{GetChildren: &api.GetChildrenRequest{Path: o.path}}}
		} else {
			req.Ops[i] = &api.MultiReadOp{Op: &api.MultiReadOp_GetData{GetData: &api.GetDataRequest{Path: o.path}}}
		}
	}
	r, err := c.do(ctx, "multiRead", "", &api.Request{Op: &api.Request_MultiRead{MultiRead: req}}, nil)
	if err != nil {
		return nil, err
	}
	res := r.GetMultiRead().GetResults()
	out := make([]ReadResult, len(res))
	for i, m := range res {
		var path string
		children := false
		if i < len(ops) {
			path, children = ops[i].path, ops[i].children
		}
		out[i] = ReadResult{Err: codeErr(m.GetErr(), "multiRead", path), Stat: api.StatFromAPI(m.GetStat())}
		if out[i].Err != nil {
			continue
		}
		if children {
			out[i].Children = m.GetChildren()
		} else {
			out[i].Data = api.DataFromAPI(m.GetData(), m.GetNullData())
		}
	}
	return out, nil
}
