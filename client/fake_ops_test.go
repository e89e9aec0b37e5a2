package client

// The fake server's operations: a small ZooKeeper tree, enough to exercise
// every call of the client and its error mapping.

import (
	"fmt"
	"strings"

	"coord/api"
	"coord/vocab"
)

func (cl *fakeCluster) apply(s *fakeStream, req *api.Request) *api.Response {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	r := &api.Response{Xid: req.GetXid()}
	code := vocab.OK
	sess := s.sess
	watch := func(p string, k watchKind) {
		if sess.watches != nil {
			sess.watches[watchKey{p, k}] = true
		}
	}
	switch op := req.GetOp().(type) {
	case *api.Request_Ping, *api.Request_Auth:
		r.Result = &api.Response_Empty{Empty: &api.Empty{}}
	case *api.Request_Close:
		cl.closeSession(sess.id)
		delete(cl.sessions, sess.id)
		r.Result = &api.Response_Empty{Empty: &api.Empty{}}
	case *api.Request_Create:
		var p string
		if p, code = cl.create(sess.id, op.Create); code == vocab.OK {
			r.Result = &api.Response_Create{Create: &api.CreateResponse{Path: p, Stat: cl.stat(p)}}
		}
	case *api.Request_Delete:
		code = cl.delete(op.Delete)
	case *api.Request_SetData:
		if code = cl.setData(op.SetData); code == vocab.OK {
			r.Result = &api.Response_Stat{Stat: &api.StatResponse{Stat: cl.stat(op.SetData.GetPath())}}
		}
	case *api.Request_GetData:
		p := op.GetData.GetPath()
		if n := cl.nodes[p]; n == nil {
			code = vocab.NoNode
		} else {
			if op.GetData.GetWatch() {
				watch(p, kindData)
			}
			r.Result = &api.Response_GetData{GetData: &api.GetDataResponse{Data: n.data, NullData: n.null, Stat: cl.stat(p)}}
		}
	case *api.Request_Exists:
		p := op.Exists.GetPath()
		if op.Exists.GetWatch() {
			watch(p, kindData)
		}
		if cl.nodes[p] == nil {
			code = vocab.NoNode
		} else {
			r.Result = &api.Response_Stat{Stat: &api.StatResponse{Stat: cl.stat(p)}}
		}
	case *api.Request_GetChildren:
		p := op.GetChildren.GetPath()
		if cl.nodes[p] == nil {
			code = vocab.NoNode
		} else {
			if op.GetChildren.GetWatch() {
				watch(p, kindChild)
			}
			r.Result = &api.Response_GetChildren{GetChildren: &api.GetChildrenResponse{Children: cl.children(p), Stat: cl.stat(p)}}
		}
	case *api.Request_AddWatch:
		k := kindPersistent
		if op.AddWatch.GetMode() == 1 {
			k = kindRecursive
		}
		watch(op.AddWatch.GetPath(), k)
		r.Result = &api.Response_Empty{Empty: &api.Empty{}}
	case *api.Request_RemoveWatches:
		code = vocab.NoWatcher
		for _, k := range kindsOf(vocab.WatcherType(op.RemoveWatches.GetType())) {
			key := watchKey{op.RemoveWatches.GetPath(), k}
			if k != kindExist && sess.watches[key] {
				delete(sess.watches, key)
				code = vocab.OK
			}
		}
	case *api.Request_GetAcl:
		if n := cl.nodes[op.GetAcl.GetPath()]; n == nil {
			code = vocab.NoNode
		} else {
			r.Result = &api.Response_GetAcl{GetAcl: &api.GetACLResponse{Acl: n.acl, Stat: cl.stat(op.GetAcl.GetPath())}}
		}
	case *api.Request_SetAcl:
		switch n := cl.nodes[op.SetAcl.GetPath()]; {
		case n == nil:
			code = vocab.NoNode
		case op.SetAcl.GetVersion() != AnyVersion && op.SetAcl.GetVersion() != n.stat.Aversion:
			code = vocab.BadVersion
		default:
			cl.zxid++
			n.acl = op.SetAcl.GetAcl()
			n.stat.Aversion++
			r.Result = &api.Response_Stat{Stat: &api.StatResponse{Stat: cl.stat(op.SetAcl.GetPath())}}
		}
	case *api.Request_Sync:
		r.Result = &api.Response_Sync{Sync: &api.SyncResponse{Path: op.Sync.GetPath()}}
	case *api.Request_GetAllChildrenNumber:
		n := int32(0)
		prefix := strings.TrimSuffix(op.GetAllChildrenNumber.GetPath(), "/") + "/"
		for q := range cl.nodes {
			if strings.HasPrefix(q, prefix) {
				n++
			}
		}
		r.Result = &api.Response_Count{Count: &api.CountResponse{Count: n}}
	case *api.Request_GetEphemerals:
		var paths []string
		for q, n := range cl.nodes {
			if n.stat.EphemeralOwner == sess.id && strings.HasPrefix(q, op.GetEphemerals.GetPrefix()) {
				paths = append(paths, q)
			}
		}
		r.Result = &api.Response_Paths{Paths: &api.PathsResponse{Paths: paths}}
	case *api.Request_Multi:
		code, r.ErrPath, r.Result = cl.multi(sess.id, op.Multi)
	case *api.Request_MultiRead:
		res := &api.MultiReadResponse{}
		for _, o := range op.MultiRead.GetOps() {
			p := o.GetGetData().GetPath() + o.GetGetChildren().GetPath()
			n := cl.nodes[p]
			switch {
			case n == nil:
				res.Results = append(res.Results, &api.MultiReadResult{Err: int32(vocab.NoNode)})
			case o.GetGetChildren() != nil:
				res.Results = append(res.Results, &api.MultiReadResult{Children: cl.children(p), Stat: cl.stat(p)})
			default:
				res.Results = append(res.Results, &api.MultiReadResult{Data: n.data, NullData: n.null, Stat: cl.stat(p)})
			}
		}
		r.Result = &api.Response_MultiRead{MultiRead: res}
	default:
		code = vocab.Unimplemented
	}
	r.Err = int32(code)
	r.Zxid = cl.zxid
	return r
}

func (cl *fakeCluster) create(owner int64, req *api.CreateRequest) (string, vocab.Code) {
	p := req.GetPath()
	par, ok := parent(p)
	if !ok {
		return "", vocab.BadArguments
	}
	pn := cl.nodes[par]
	if pn == nil {
		return "", vocab.NoNode
	}
	if pn.stat.EphemeralOwner != 0 {
		return "", vocab.NoChildrenForEphemerals
	}
	mode := vocab.CreateMode(req.GetMode())
	if mode.IsSequential() {
		p = fmt.Sprintf("%s%010d", p, pn.stat.Cversion)
	}
	if cl.nodes[p] != nil {
		return "", vocab.NodeExists
	}
	cl.zxid++
	n := &fakeNode{data: req.GetData(), null: req.GetNullData(), acl: req.GetAcl()}
	n.stat = vocab.Stat{Czxid: cl.zxid, Mzxid: cl.zxid, Pzxid: cl.zxid}
	if mode.IsEphemeral() {
		n.stat.EphemeralOwner = owner
	}
	cl.nodes[p] = n
	pn.stat.Cversion++
	pn.stat.Pzxid = cl.zxid
	cl.fire(p, vocab.EventNodeCreated)
	cl.fire(par, vocab.EventNodeChildrenChanged)
	return p, vocab.OK
}

func (cl *fakeCluster) delete(req *api.DeleteRequest) vocab.Code {
	p := req.GetPath()
	n := cl.nodes[p]
	switch {
	case n == nil:
		return vocab.NoNode
	case req.GetVersion() != AnyVersion && req.GetVersion() != n.stat.Version:
		return vocab.BadVersion
	case len(cl.children(p)) > 0:
		return vocab.NotEmpty
	}
	cl.zxid++
	cl.remove(p)
	return vocab.OK
}

func (cl *fakeCluster) setData(req *api.SetDataRequest) vocab.Code {
	n := cl.nodes[req.GetPath()]
	switch {
	case n == nil:
		return vocab.NoNode
	case req.GetVersion() != AnyVersion && req.GetVersion() != n.stat.Version:
		return vocab.BadVersion
	}
	cl.zxid++
	n.data, n.null = req.GetData(), req.GetNullData()
	n.stat.Version++
	n.stat.Mzxid = cl.zxid
	cl.fire(req.GetPath(), vocab.EventNodeDataChanged)
	return vocab.OK
}

// multi applies ops all or nothing; events fire only if all succeed.
func (cl *fakeCluster) multi(owner int64, req *api.MultiRequest) (vocab.Code, string, *api.Response_Multi) {
	saved := make(map[string]*fakeNode, len(cl.nodes))
	for p, n := range cl.nodes {
		c := *n
		saved[p] = &c
	}
	savedZxid := cl.zxid
	var triggers []fakeTrigger
	cl.collect = &triggers
	defer func() { cl.collect = nil }()
	res := &api.MultiResponse{}
	failed, failPath := vocab.OK, ""
	for _, o := range req.GetOps() {
		if failed != vocab.OK {
			res.Results = append(res.Results, &api.MultiResult{Err: int32(vocab.RuntimeInconsistency)})
			continue
		}
		var code vocab.Code
		out := &api.MultiResult{}
		switch x := o.GetOp().(type) {
		case *api.MultiOp_Create:
			out.Path, code = cl.create(owner, x.Create)
			failPath = x.Create.GetPath()
		case *api.MultiOp_Delete:
			code, failPath = cl.delete(x.Delete), x.Delete.GetPath()
		case *api.MultiOp_SetData:
			code, failPath = cl.setData(x.SetData), x.SetData.GetPath()
		case *api.MultiOp_Check:
			failPath = x.Check.GetPath()
			if n := cl.nodes[failPath]; n == nil {
				code = vocab.NoNode
			} else if x.Check.GetVersion() != AnyVersion && n.stat.Version != x.Check.GetVersion() {
				code = vocab.BadVersion
			}
		}
		out.Err, failed = int32(code), code
		res.Results = append(res.Results, out)
	}
	if failed != vocab.OK {
		for _, r := range res.Results {
			if r.Err == 0 {
				r.Path = ""
			}
		}
		cl.nodes, cl.zxid = saved, savedZxid
		return failed, failPath, &api.Response_Multi{Multi: res}
	}
	cl.collect = nil
	for i, o := range req.GetOps() {
		if p := res.Results[i].GetPath() + o.GetSetData().GetPath(); p != "" {
			res.Results[i].Stat = cl.stat(p)
		}
	}
	for _, t := range triggers {
		cl.fire(t.path, t.typ)
	}
	return vocab.OK, "", &api.Response_Multi{Multi: res}
}
