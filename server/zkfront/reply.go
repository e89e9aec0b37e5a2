package zkfront

import (
	"coord/fsm"
	"coord/server/sessions"
	"coord/vocab"
	"coord/zk"
)

// encodeReply appends r as the jute reply to the request tag describes.
func encodeReply(dst []byte, tag replyTag, r *sessions.Reply) []byte {
	h := zk.ReplyHeader{Xid: int32(r.Xid), Zxid: r.Zxid, Err: r.Err}
	if r.Kind == sessions.OpRefuse {
		if r.Err == vocab.Unimplemented {
			h.Zxid = -1 // as ZooKeeper answers an op it does not know
		}
		return zk.AppendReply(dst, h, nil)
	}
	if tag.op == zk.OpAuth || tag.op == zk.OpSASL {
		h.Zxid = 0 // as ZooKeeper
	}
	if tag.op == zk.OpMulti && r.Body == sessions.BodyMulti {
		if tag.marshalAt > 0 && firstFailed(r.Multi) == tag.marshalAt-1 {
			h.Err = vocab.MarshallingError
			return zk.AppendReply(dst, h, nil)
		}
		// A failed multi's codes are in its results; the header says OK.
		return zk.AppendReply(dst, zk.ReplyHeader{Xid: h.Xid, Zxid: r.Zxid}, multiReply(tag, r.Multi))
	}
	if tag.op == zk.OpSASL && h.Err == vocab.AuthFailed {
		// ZooKeeper answers a failed SASL login with an empty token
		// (SetSASLResponse(null), length -1) after the AuthFailed header.
		// The Java client reads a token from every reply while its SASL
		// exchange runs, whatever the header says: without one it fails
		// on EOF, reconnects and tries again for ever instead of reporting
		// AuthFailed.
		return zk.AppendReply(dst, h, &zk.SASLResponse{Token: nil})
	}
	if h.Err != vocab.OK {
		return zk.AppendReply(dst, h, nil)
	}
	var body zk.Record
	switch tag.op {
	case zk.OpCreate:
		body = &zk.CreateResponse{Path: r.Path}
	case zk.OpCreate2, zk.OpCreateContainer, zk.OpCreateTTL:
		body = &zk.Create2Response{Path: r.Path, Stat: r.Stat}
	case zk.OpExists:
		body = &zk.ExistsResponse{Stat: r.Stat}
	case zk.OpGetData, zk.OpReconfig:
		body = &zk.GetDataResponse{Data: r.Data, Stat: r.Stat}
	case zk.OpSetData:
		body = &zk.SetDataResponse{Stat: r.Stat}
	case zk.OpSetACL:
		body = &zk.SetACLResponse{Stat: r.Stat}
	case zk.OpGetACL:
		body = &zk.GetACLResponse{ACL: r.ACL, Stat: r.Stat}
	case zk.OpGetChildren:
		body = &zk.GetChildrenResponse{Children: r.Children}
	case zk.OpGetChildren2:
		body = &zk.GetChildren2Response{Children: r.Children, Stat: r.Stat}
	case zk.OpSync:
		body = &zk.SyncResponse{Path: r.Path}
	case zk.OpGetAllChildrenNumber:
		body = &zk.GetAllChildrenNumberResponse{TotalNumber: r.Count}
	case zk.OpGetEphemerals:
		body = &zk.GetEphemeralsResponse{Ephemerals: r.Children}
	case zk.OpSASL:
		body = &zk.SASLResponse{Token: r.Data}
	case zk.OpWhoAmI:
		w := &zk.WhoAmIResponse{ClientInfo: make([]zk.ClientInfo, len(r.Clients))}
		for i, ci := range r.Clients {
			w.ClientInfo[i] = zk.ClientInfo{AuthScheme: ci.Scheme, User: ci.User}
		}
		body = w
	case zk.OpAddWatch:
		body = &zk.ErrorResponse{Err: vocab.OK}
	case zk.OpMultiRead:
		body = multiReadReply(r.Reads)
	}
	return zk.AppendReply(dst, h, body)
}

// multiReply is a multi's results as ZooKeeper reports them: every op an
// OpError with its code if any failed, else each op's result by its type.
func multiReply(tag replyTag, results []fsm.OpResult) *zk.MultiResponse {
	out := &zk.MultiResponse{Results: make([]zk.MultiResult, len(results))}
	failed := false
	for _, r := range results {
		failed = failed || r.Code != vocab.OK
	}
	for i, r := range results {
		res := zk.MultiResult{Type: zk.OpError, Err: r.Code}
		if !failed && i < len(tag.multi) {
			switch op := tag.multi[i]; op {
			case zk.OpCreate:
				res = zk.MultiResult{Type: zk.OpCreate, Path: r.Path}
			case zk.OpCreate2, zk.OpCreateContainer, zk.OpCreateTTL:
				res = zk.MultiResult{Type: zk.OpCreate2, Path: r.Path, Stat: r.Stat}
			case zk.OpSetData:
				res = zk.MultiResult{Type: zk.OpSetData, Stat: r.Stat}
			default:
				res = zk.MultiResult{Type: op}
			}
		}
		out.Results[i] = res
	}
	return out
}

// firstFailed is the index of a multi's op that failed it, or -1.
func firstFailed(results []fsm.OpResult) int {
	for i, r := range results {
		if r.Code != vocab.OK {
			return i
		}
	}
	return -1
}

// multiReadReply is a multiRead's results: a failed read as OpError with
// its code, the others by their kind.
func multiReadReply(reads []sessions.ReadResult) *zk.MultiResponse {
	out := &zk.MultiResponse{Results: make([]zk.MultiResult, len(reads))}
	for i, r := range reads {
		switch {
		case r.Err != vocab.OK:
			out.Results[i] = zk.MultiResult{Type: zk.OpError, Err: r.Err}
		case r.Kind == sessions.OpGetChildren:
			out.Results[i] = zk.MultiResult{Type: zk.OpGetChildren, Children: r.Children}
		default:
			out.Results[i] = zk.MultiResult{Type: zk.OpGetData, Data: r.Data, Stat: r.Stat}
		}
	}
	return out
}
