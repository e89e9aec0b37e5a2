package zk

import "fmt"

// NewRequest returns a zero request body for op, to decode into: nil and no
// error for the ops that have no body (ping, closeSession, whoAmI), and
// ErrUnknownOp for op codes a client may not send (notification, error,
// createSession, unknown numbers). ZooKeeper answers an unknown op with
// Unimplemented and closes the connection.
func NewRequest(op OpCode) (Record, error) {
	switch op {
	case OpCreate, OpCreate2, OpCreateContainer:
		return new(CreateRequest), nil
	case OpCreateTTL:
		return new(CreateTTLRequest), nil
	case OpDelete:
		return new(DeleteRequest), nil
	case OpDeleteContainer:
		return new(DeleteContainerRequest), nil
	case OpExists:
		return new(ExistsRequest), nil
	case OpGetData:
		return new(GetDataRequest), nil
	case OpSetData:
		return new(SetDataRequest), nil
	case OpGetACL:
		return new(GetACLRequest), nil
	case OpSetACL:
		return new(SetACLRequest), nil
	case OpGetChildren:
		return new(GetChildrenRequest), nil
	case OpGetChildren2:
		return new(GetChildren2Request), nil
	case OpSync:
		return new(SyncRequest), nil
	case OpCheck:
		return new(CheckVersionRequest), nil
	case OpMulti, OpMultiRead:
		return new(MultiRequest), nil
	case OpReconfig:
		return new(ReconfigRequest), nil
	case OpCheckWatches:
		return new(CheckWatchesRequest), nil
	case OpRemoveWatches:
		return new(RemoveWatchesRequest), nil
	case OpAuth:
		return new(AuthPacket), nil
	case OpSetWatches:
		return new(SetWatches), nil
	case OpSetWatches2:
		return new(SetWatches2), nil
	case OpSASL:
		return new(SASLRequest), nil
	case OpGetEphemerals:
		return new(GetEphemeralsRequest), nil
	case OpGetAllChildrenNumber:
		return new(GetAllChildrenNumberRequest), nil
	case OpAddWatch:
		return new(AddWatchRequest), nil
	case OpPing, OpCloseSession, OpWhoAmI:
		return nil, nil
	}
	return nil, fmt.Errorf("%w %d", ErrUnknownOp, int32(op))
}

// DecodeRequest splits a request frame (without its length prefix) into the
// header and the decoded body. The body is nil for ops without one. Errors:
// a frame too short for the header wraps ErrTruncated and the header is
// zero (the connection is beyond saving); an unknown op wraps ErrUnknownOp;
// a body that does not decode wraps ErrMalformed (ZooKeeper answers
// MarshallingError). In the last two cases the header is valid, so the
// server can answer the xid; CodeOf(err) gives the code. Bytes after the
// body are ignored, as ZooKeeper ignores them.
func DecodeRequest(frame []byte) (RequestHeader, Record, error) {
	var h RequestHeader
	d := NewDecoder(frame)
	if err := h.Decode(d); err != nil {
		return RequestHeader{}, nil, err
	}
	body, err := NewRequest(h.Type)
	if err != nil || body == nil {
		return h, nil, err
	}
	if err := body.Decode(d); err != nil {
		return h, nil, fmt.Errorf("%s body: %w", h.Type, err)
	}
	if m, ok := body.(*MultiRequest); ok && len(m.Ops) > 0 && m.IsRead() != (h.Type == OpMultiRead) {
		return h, nil, fmt.Errorf("%s body: %w: ops of the wrong kind", h.Type, ErrBadMulti)
	}
	return h, body, nil
}

// DecodeReply decodes a reply frame (without its length prefix): the header,
// then body when the header's Err is OK and body is not nil, as clients do.
func DecodeReply(frame []byte, body Record) (ReplyHeader, error) {
	var h ReplyHeader
	d := NewDecoder(frame)
	if err := h.Decode(d); err != nil {
		return h, err
	}
	if body != nil && h.Err == 0 {
		return h, body.Decode(d)
	}
	return h, nil
}

// AppendRequest appends a framed request: the length prefix, the header and
// body (nil for none).
func AppendRequest(dst []byte, h RequestHeader, body Record) []byte {
	e, start := beginFrame(dst)
	e.Int32(h.Xid)
	e.Int32(int32(h.Type))
	if body != nil {
		body.Encode(&e)
	}
	return endFrame(e, start)
}

// AppendReply appends a framed reply: the length prefix, the header and body
// (nil for none). Send no body when h.Err is not OK.
func AppendReply(dst []byte, h ReplyHeader, body Record) []byte {
	e, start := beginFrame(dst)
	e.Int32(h.Xid)
	e.Int64(h.Zxid)
	e.Int32(int32(h.Err))
	if body != nil {
		body.Encode(&e)
	}
	return endFrame(e, start)
}

// AppendEvent appends a framed notification for ev. zxid goes in the reply
// header: ZooKeeper 3.8 sends -1, 3.9 the zxid of the change.
func AppendEvent(dst []byte, zxid int64, ev *WatcherEvent) []byte {
	return AppendReply(dst, ReplyHeader{Xid: XidNotification, Zxid: zxid}, ev)
}
