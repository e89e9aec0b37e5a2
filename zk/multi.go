package zk

import "coord/vocab"

// Multi framing (MultiOperationRecord, MultiResponse): there is no count.
// Each op or result is a MultiHeader{type, done=false, err} followed by its
// body, and the list ends with MultiHeader{-1, true, -1}. In a request every
// op's header has err -1. In a response a failed op has type -1 (OpError)
// and done=false, its header's err and an ErrorResponse body both carry the
// code; only done tells it from the terminator.

// MultiHeader precedes each op of a multi request or response.
type MultiHeader struct {
	Type OpCode
	Done bool
	Err  vocab.Code
}

// multiHeaderSize is the encoded size of a MultiHeader.
const multiHeaderSize = 9

func (h *MultiHeader) Encode(e *Encoder) {
	e.Int32(int32(h.Type))
	e.Bool(h.Done)
	e.Int32(int32(h.Err))
}

func (h *MultiHeader) Decode(d *Decoder) error {
	h.Type = OpCode(d.Int32())
	h.Done = d.Bool()
	h.Err = vocab.Code(d.Int32())
	return d.Err()
}

var multiEnd = MultiHeader{Type: -1, Done: true, Err: -1}

// MultiOp is one op of a multi (op multi: the create variants, delete,
// setData, check) or of a multiRead (getData, getChildren). Which fields are
// on the wire depends on Type, as in the single-op request of that type.
type MultiOp struct {
	Type    OpCode
	Path    string
	Data    []byte           // create*, setData
	ACL     []vocab.ACL      // create*
	Flags   vocab.CreateMode // create*
	TTL     int64            // createTTL
	Version int32            // delete, setData, check
	Watch   bool             // getData, getChildren: sent, but ZooKeeper sets no watch from a multiRead
}

// IsRead reports whether the op belongs in a multiRead.
func (op *MultiOp) IsRead() bool { return op.Type == OpGetData || op.Type == OpGetChildren }

func multiOpKnown(t OpCode) bool {
	switch t {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL, OpDelete, OpSetData, OpCheck,
		OpGetData, OpGetChildren:
		return true
	}
	return false
}

// MultiRequest is the body of multi and multiRead. Decode refuses unknown op
// types and a mix of reads and writes, as ZooKeeper does (a marshalling
// error); DecodeRequest also refuses reads in a multi and writes in a
// multiRead. Encode writes an op of an unknown type as a bare header.
type MultiRequest struct {
	Ops []MultiOp
}

func (r *MultiRequest) Encode(e *Encoder) {
	for i := range r.Ops {
		op := &r.Ops[i]
		h := MultiHeader{Type: op.Type, Done: false, Err: -1}
		h.Encode(e)
		switch op.Type {
		case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
			e.UString(op.Path)
			e.Buffer(op.Data)
			e.ACLs(op.ACL)
			e.Int32(int32(op.Flags))
			if op.Type == OpCreateTTL {
				e.Int64(op.TTL)
			}
		case OpDelete, OpCheck:
			e.UString(op.Path)
			e.Int32(op.Version)
		case OpSetData:
			e.UString(op.Path)
			e.Buffer(op.Data)
			e.Int32(op.Version)
		case OpGetData, OpGetChildren:
			e.UString(op.Path)
			e.Bool(op.Watch)
		}
	}
	multiEnd.Encode(e)
}

func (r *MultiRequest) Decode(d *Decoder) error {
	r.Ops = nil
	for d.Err() == nil {
		var h MultiHeader
		if h.Decode(d) != nil || h.Done {
			break
		}
		if !multiOpKnown(h.Type) {
			d.Fail(ErrBadMulti)
			break
		}
		op := MultiOp{Type: h.Type, Path: d.UString()}
		switch h.Type {
		case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
			op.Data = d.Buffer()
			op.ACL = d.ACLs()
			op.Flags = vocab.CreateMode(d.Int32())
			if h.Type == OpCreateTTL {
				op.TTL = d.Int64()
			}
		case OpDelete, OpCheck:
			op.Version = d.Int32()
		case OpSetData:
			op.Data = d.Buffer()
			op.Version = d.Int32()
		case OpGetData, OpGetChildren:
			op.Watch = d.Bool()
		}
		if len(r.Ops) > 0 && r.Ops[0].IsRead() != op.IsRead() {
			d.Fail(ErrBadMulti)
			break
		}
		r.Ops = append(r.Ops, op)
	}
	if d.Err() != nil {
		r.Ops = nil
	}
	return d.Err()
}

// IsRead reports whether r holds reads (a multiRead); false for no ops.
func (r *MultiRequest) IsRead() bool { return len(r.Ops) > 0 && r.Ops[0].IsRead() }

// MultiResult is one op's result in a MultiResponse. Type is the op's type,
// or OpError for an op that failed or did not run. ZooKeeper reports the
// results of create2, createTTL and createContainer all as OpCreate2 (path
// and stat) and that of create as OpCreate (path only).
type MultiResult struct {
	Type     OpCode
	Err      vocab.Code // OpError only
	Path     string     // OpCreate, OpCreate2
	Stat     vocab.Stat // OpCreate2, OpSetData, OpGetData
	Data     []byte     // OpGetData
	Children []string   // OpGetChildren
}

// MultiResponse answers multi and multiRead. A failed multi still has
// ReplyHeader.Err OK: the codes are in the results (see MultiFailure). A
// multiRead runs every op; each failed read is an OpError result.
type MultiResponse struct {
	Results []MultiResult
}

func (r *MultiResponse) Encode(e *Encoder) {
	for i := range r.Results {
		res := &r.Results[i]
		h := MultiHeader{Type: res.Type}
		if res.Type == OpError {
			h.Err = res.Err
		}
		h.Encode(e)
		switch res.Type {
		case OpCreate:
			e.UString(res.Path)
		case OpCreate2:
			e.UString(res.Path)
			e.Stat(&res.Stat)
		case OpSetData:
			e.Stat(&res.Stat)
		case OpGetData:
			e.Buffer(res.Data)
			e.Stat(&res.Stat)
		case OpGetChildren:
			e.Strings(res.Children)
		case OpError:
			e.Int32(int32(res.Err))
		}
	}
	multiEnd.Encode(e)
}

func (r *MultiResponse) Decode(d *Decoder) error {
	r.Results = nil
	for d.Err() == nil {
		var h MultiHeader
		if h.Decode(d) != nil || h.Done {
			break
		}
		res := MultiResult{Type: h.Type}
		switch h.Type {
		case OpCreate:
			res.Path = d.UString()
		case OpCreate2:
			res.Path = d.UString()
			res.Stat = d.Stat()
		case OpDelete, OpCheck:
		case OpSetData:
			res.Stat = d.Stat()
		case OpGetData:
			res.Data = d.Buffer()
			res.Stat = d.Stat()
		case OpGetChildren:
			res.Children = d.Strings()
		case OpError:
			res.Err = vocab.Code(d.Int32())
		default:
			d.Fail(ErrBadMulti)
		}
		r.Results = append(r.Results, res)
	}
	if d.Err() != nil {
		r.Results = nil
	}
	return d.Err()
}

// MultiFailure builds the response ZooKeeper sends for a multi of n ops whose
// op number failed (0-based) failed with code: every op is an OpError result;
// those before it carry OK, the failed one code, and those after it
// RuntimeInconsistency (they were not tried).
func MultiFailure(n, failed int, code vocab.Code) MultiResponse {
	res := make([]MultiResult, n)
	for i := range res {
		res[i].Type = OpError
		switch {
		case i < failed:
			res[i].Err = vocab.OK
		case i == failed:
			res[i].Err = code
		default:
			res[i].Err = vocab.RuntimeInconsistency
		}
	}
	return MultiResponse{Results: res}
}
