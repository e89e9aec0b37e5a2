package zk

import (
	"errors"
	"reflect"
	"testing"

	"coord/vocab"
)

var (
	testStat = vocab.Stat{Czxid: 0x100000003, Mzxid: 0x100000007, Ctime: 1700000000123, Mtime: 1700000000456,
		Version: 2, Cversion: 3, Aversion: 1, EphemeralOwner: 0x1000000ab, DataLength: 5, NumChildren: 7,
		Pzxid: 0x100000009}
	testACL = []vocab.ACL{{Perms: vocab.PermAll, ID: vocab.AnyoneID},
		{Perms: vocab.PermRead | vocab.PermAdmin, ID: vocab.Id{Scheme: "digest", ID: "bob:c2VjcmV0"}}}
)

// samples holds one record of every type with every field set.
func samples() []Record {
	return []Record{
		&ConnectRequest{ProtocolVersion: 0, LastZxidSeen: 0x200000001, TimeOut: 30000, SessionID: 0x1234,
			Passwd: []byte("0123456789abcdef"), ReadOnly: true, HasReadOnly: true},
		&ConnectRequest{LastZxidSeen: 5, TimeOut: 4000, Passwd: make([]byte, 16)},
		&ConnectResponse{TimeOut: 30000, SessionID: 0x1234, Passwd: []byte("p"), ReadOnly: true, HasReadOnly: true},
		&ConnectResponse{TimeOut: 4000, SessionID: 9, Passwd: []byte{}},
		&RequestHeader{Xid: 7, Type: OpCreate2},
		&ReplyHeader{Xid: 7, Zxid: 0x100000003, Err: vocab.NodeExists},
		&WatcherEvent{Type: EventNodeDataChanged, State: StateSyncConnected, Path: "/a/b"},
		&AuthPacket{Type: 0, Scheme: "digest", Auth: []byte("bob:secret")},
		&SASLRequest{Token: []byte{1, 2, 3}},
		&SASLResponse{Token: []byte{}},
		&WhoAmIResponse{ClientInfo: []ClientInfo{{AuthScheme: "ip", User: "127.0.0.1"}, {AuthScheme: "digest", User: "bob"}}},
		&ErrorResponse{Err: vocab.NoNode},
		&CreateRequest{Path: "/a", Data: []byte("hello"), ACL: testACL, Flags: vocab.ModeEphemeralSequential},
		&CreateRequest{Path: "/null-data", ACL: testACL[:1], Flags: vocab.ModeContainer},
		&CreateTTLRequest{Path: "/t", Data: []byte{}, ACL: testACL, Flags: vocab.ModePersistentTTL, TTL: 60000},
		&CreateResponse{Path: "/a0000000001"},
		&Create2Response{Path: "/a", Stat: testStat},
		&DeleteRequest{Path: "/a", Version: -1},
		&DeleteContainerRequest{Path: "/container"},
		&ExistsRequest{Path: "/a", Watch: true},
		&ExistsResponse{Stat: testStat},
		&GetDataRequest{Path: "/a", Watch: true},
		&GetDataResponse{Data: []byte("hello"), Stat: testStat},
		&GetDataResponse{Stat: testStat},
		&SetDataRequest{Path: "/a", Data: []byte("v2"), Version: 4},
		&SetDataResponse{Stat: testStat},
		&GetACLRequest{Path: "/a"},
		&GetACLResponse{ACL: testACL, Stat: testStat},
		&SetACLRequest{Path: "/a", ACL: testACL, Version: 0},
		&SetACLResponse{Stat: testStat},
		&GetChildrenRequest{Path: "/", Watch: true},
		&GetChildrenResponse{Children: []string{"a", "zookeeper", ""}},
		&GetChildrenResponse{Children: []string{}},
		&GetChildren2Request{Path: "/x", Watch: false},
		&GetChildren2Response{Children: []string{"b", "c"}, Stat: testStat},
		&SyncRequest{Path: "/s"},
		&SyncResponse{Path: "/s"},
		&CheckVersionRequest{Path: "/c", Version: 3},
		&GetAllChildrenNumberRequest{Path: "/"},
		&GetAllChildrenNumberResponse{TotalNumber: 42},
		&GetEphemeralsRequest{PrefixPath: "/app"},
		&GetEphemeralsResponse{Ephemerals: []string{"/app/e1", "/app/e2"}},
		&ReconfigRequest{JoiningServers: "server.4=h:2888:3888;2181", LeavingServers: "2", NewMembers: "", CurConfigID: -1},
		&SetWatches{RelativeZxid: 0x100000010, DataWatches: []string{"/d"}, ExistWatches: []string{"/e1", "/e2"},
			ChildWatches: []string{}},
		&SetWatches2{RelativeZxid: 3, DataWatches: []string{"/d"}, ExistWatches: []string{}, ChildWatches: []string{"/c"},
			PersistentWatches: []string{"/p"}, PersistentRecursiveWatches: []string{"/r", "/r2"}},
		&AddWatchRequest{Path: "/p", Mode: vocab.AddWatchPersistentRecursive},
		&CheckWatchesRequest{Path: "/w", Type: vocab.WatcherData},
		&RemoveWatchesRequest{Path: "/w", Type: vocab.WatcherAny},
		&MultiHeader{Type: OpCreate, Done: false, Err: -1},
		&MultiRequest{Ops: []MultiOp{
			{Type: OpCreate, Path: "/m1", Data: []byte("d"), ACL: testACL, Flags: vocab.ModePersistent},
			{Type: OpCreate2, Path: "/m2", ACL: testACL[:1], Flags: vocab.ModeEphemeral},
			{Type: OpCreateContainer, Path: "/m3", Data: []byte{}, ACL: testACL[:1], Flags: vocab.ModeContainer},
			{Type: OpCreateTTL, Path: "/m4", Data: []byte("t"), ACL: testACL[:1], Flags: vocab.ModePersistentTTL, TTL: 99},
			{Type: OpDelete, Path: "/m5", Version: -1},
			{Type: OpSetData, Path: "/m6", Data: []byte("s"), Version: 2},
			{Type: OpCheck, Path: "/m7", Version: 5},
		}},
		&MultiRequest{Ops: []MultiOp{{Type: OpGetData, Path: "/r1"}, {Type: OpGetChildren, Path: "/r2"}}},
		&MultiResponse{Results: []MultiResult{
			{Type: OpCreate, Path: "/m1"},
			{Type: OpCreate2, Path: "/m2", Stat: testStat},
			{Type: OpDelete},
			{Type: OpSetData, Stat: testStat},
			{Type: OpCheck},
			{Type: OpGetData, Data: []byte("x"), Stat: testStat},
			{Type: OpGetData, Stat: testStat},
			{Type: OpGetChildren, Children: []string{"a", "b"}},
			{Type: OpError, Err: vocab.NoNode},
		}},
	}
}

func newLike(r Record) Record { return reflect.New(reflect.TypeOf(r).Elem()).Interface().(Record) }

func TestRoundTrip(t *testing.T) {
	for _, r := range samples() {
		b := Marshal(r)
		got := newLike(r)
		if err := Unmarshal(b, got); err != nil {
			t.Errorf("%T: decode: %v", r, err)
			continue
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("%T round trip:\n got %+v\nwant %+v", r, got, r)
		}
		// Appending to a non-empty buffer keeps the prefix.
		if b2 := AppendRecord([]byte{9}, r); b2[0] != 9 || string(b2[1:]) != string(b) {
			t.Errorf("%T: AppendRecord does not append", r)
		}
	}
}

// A record's encoding cut short anywhere must fail to decode, except where
// the shorter form is itself valid (the optional readOnly byte, the raw
// deleteContainer path).
func TestTruncated(t *testing.T) {
	for _, r := range samples() {
		b := Marshal(r)
		for n := 0; n < len(b); n++ {
			got := newLike(r)
			err := Unmarshal(b[:n], got)
			optional := false
			switch x := r.(type) {
			case *ConnectRequest:
				optional = x.HasReadOnly && n == len(b)-1
			case *ConnectResponse:
				optional = x.HasReadOnly && n == len(b)-1
			case *DeleteContainerRequest:
				optional = true
			}
			if optional {
				continue
			}
			if err == nil {
				t.Errorf("%T: %d of %d bytes decoded without error: %+v", r, n, len(b), got)
			} else if !errors.Is(err, ErrMalformed) {
				t.Errorf("%T: %d bytes: error %v does not wrap ErrMalformed", r, n, err)
			}
		}
	}
}

func TestConnectReadOnlyByte(t *testing.T) {
	full := &ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), ReadOnly: false, HasReadOnly: true}
	short := &ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)}
	if n := len(Marshal(short)); n != 44 {
		t.Fatalf("ConnectRequest without readOnly is %d bytes, want 44", n)
	}
	if n := len(Marshal(full)); n != 45 {
		t.Fatalf("ConnectRequest with readOnly is %d bytes, want 45", n)
	}
	for _, req := range []*ConnectRequest{full, short} {
		var got ConnectRequest
		if err := Unmarshal(Marshal(req), &got); err != nil || got.HasReadOnly != req.HasReadOnly {
			t.Fatalf("decode: %v, HasReadOnly %v want %v", err, got.HasReadOnly, req.HasReadOnly)
		}
		resp := got.Response(10000, 0x55, []byte("0123456789abcdef"), false)
		want := 36
		if req.HasReadOnly {
			want = 37
		}
		if n := len(Marshal(&resp)); n != want {
			t.Errorf("response to HasReadOnly=%v is %d bytes, want %d", req.HasReadOnly, n, want)
		}
	}
	ref := short.Refusal()
	if ref.TimeOut != 0 || ref.SessionID != 0 || len(ref.Passwd) != 16 || ref.HasReadOnly {
		t.Errorf("Refusal = %+v", ref)
	}
}

func TestNullVersusEmpty(t *testing.T) {
	// null buffer stays null, empty stays empty
	for _, data := range [][]byte{nil, {}} {
		var got GetDataResponse
		if err := Unmarshal(Marshal(&GetDataResponse{Data: data}), &got); err != nil {
			t.Fatal(err)
		}
		if (got.Data == nil) != (data == nil) {
			t.Errorf("data %#v came back as %#v", data, got.Data)
		}
	}
	// a nil vector is written as an empty one, never as null
	b := Marshal(&GetChildrenResponse{})
	if string(b[:4]) != "\x00\x00\x00\x00" {
		t.Errorf("nil children encoded as % x, want count 0", b)
	}
	// a null vector and a null string from the wire decode as nil and ""
	null := []byte{0xff, 0xff, 0xff, 0xff}
	var gc GetChildrenResponse
	if err := Unmarshal(null, &gc); err != nil || gc.Children != nil {
		t.Errorf("null vector: %v, %#v", err, gc.Children)
	}
	var sr SyncRequest
	if err := Unmarshal(null, &sr); err != nil || sr.Path != "" {
		t.Errorf("null string: %v, %q", err, sr.Path)
	}
}

func TestDecodeRequest(t *testing.T) {
	frame := func(h RequestHeader, body Record) []byte { return AppendRequest(nil, h, body)[4:] }

	h, body, err := DecodeRequest(frame(RequestHeader{Xid: 3, Type: OpSetData},
		&SetDataRequest{Path: "/x", Data: []byte("1"), Version: -1}))
	if err != nil || h.Xid != 3 || h.Type != OpSetData {
		t.Fatalf("setData: %v %+v", err, h)
	}
	if sd, ok := body.(*SetDataRequest); !ok || sd.Path != "/x" || string(sd.Data) != "1" || sd.Version != -1 {
		t.Fatalf("setData body %#v", body)
	}

	for _, op := range []OpCode{OpPing, OpCloseSession, OpWhoAmI} {
		h, body, err := DecodeRequest(frame(RequestHeader{Xid: XidPing, Type: op}, nil))
		if err != nil || body != nil || h.Type != op {
			t.Errorf("%v: %v %#v", op, err, body)
		}
	}

	for _, op := range []OpCode{OpNotification, OpError, OpCreateSession, 23, 99, 108, -3} {
		h, _, err := DecodeRequest(frame(RequestHeader{Xid: 5, Type: op}, nil))
		if !errors.Is(err, ErrUnknownOp) || h.Xid != 5 || CodeOf(err) != vocab.Unimplemented {
			t.Errorf("op %d: err %v, header %+v", op, err, h)
		}
	}

	// a body that does not decode: header kept, MarshallingError
	bad := frame(RequestHeader{Xid: 9, Type: OpCreate}, &SyncRequest{Path: "/x"})
	if h, _, err := DecodeRequest(bad); !errors.Is(err, ErrMalformed) || h.Xid != 9 || CodeOf(err) != vocab.MarshallingError {
		t.Errorf("bad body: %v %+v", err, h)
	}
	// a frame too short for the header
	if _, _, err := DecodeRequest([]byte{0, 0, 0}); !errors.Is(err, ErrTruncated) {
		t.Errorf("short header: %v", err)
	}

	// reads in a multi and writes in a multiRead are refused; mixing is refused
	reads := &MultiRequest{Ops: []MultiOp{{Type: OpGetData, Path: "/a"}}}
	writes := &MultiRequest{Ops: []MultiOp{{Type: OpDelete, Path: "/a", Version: -1}}}
	mixed := &MultiRequest{Ops: []MultiOp{writes.Ops[0], reads.Ops[0]}}
	cases := []struct {
		op   OpCode
		body *MultiRequest
		ok   bool
	}{{OpMulti, writes, true}, {OpMultiRead, reads, true}, {OpMulti, reads, false},
		{OpMultiRead, writes, false}, {OpMulti, mixed, false}, {OpMulti, &MultiRequest{}, true}}
	for _, c := range cases {
		_, body, err := DecodeRequest(frame(RequestHeader{Xid: 1, Type: c.op}, c.body))
		if c.ok != (err == nil) {
			t.Errorf("%v with %+v: err %v", c.op, c.body.Ops, err)
		}
		if err != nil && !errors.Is(err, ErrBadMulti) {
			t.Errorf("%v: error %v is not ErrBadMulti", c.op, err)
		}
		if c.ok {
			if _, isMulti := body.(*MultiRequest); !isMulti {
				t.Errorf("%v: body %T", c.op, body)
			}
		}
	}
}

func TestNewRequestCoversEveryOp(t *testing.T) {
	noBody := map[OpCode]bool{OpPing: true, OpCloseSession: true, OpWhoAmI: true}
	invalid := map[OpCode]bool{OpNotification: true, OpError: true, OpCreateSession: true}
	for op := range opNames {
		r, err := NewRequest(op)
		switch {
		case invalid[op]:
			if !errors.Is(err, ErrUnknownOp) {
				t.Errorf("%v: want ErrUnknownOp, got %v", op, err)
			}
		case noBody[op]:
			if r != nil || err != nil {
				t.Errorf("%v: want no body, got %T %v", op, r, err)
			}
		default:
			if r == nil || err != nil {
				t.Errorf("%v: no request record (%v)", op, err)
			}
		}
	}
}

func TestMultiFailure(t *testing.T) {
	m := MultiFailure(3, 1, vocab.NoNode)
	want := []vocab.Code{vocab.OK, vocab.NoNode, vocab.RuntimeInconsistency}
	for i, r := range m.Results {
		if r.Type != OpError || r.Err != want[i] {
			t.Errorf("result %d = %+v, want error %v", i, r, want[i])
		}
	}
}

func TestDecodeReply(t *testing.T) {
	ok := AppendReply(nil, ReplyHeader{Xid: 4, Zxid: 10}, &GetDataResponse{Data: []byte("v"), Stat: testStat})
	var body GetDataResponse
	h, err := DecodeReply(ok[4:], &body)
	if err != nil || h.Xid != 4 || h.Zxid != 10 || string(body.Data) != "v" || body.Stat != testStat {
		t.Fatalf("DecodeReply: %v %+v %+v", err, h, body)
	}
	failed := AppendReply(nil, ReplyHeader{Xid: 5, Zxid: 10, Err: vocab.NoNode}, nil)
	body = GetDataResponse{}
	if h, err := DecodeReply(failed[4:], &body); err != nil || h.Err != vocab.NoNode || body.Data != nil {
		t.Fatalf("error reply: %v %+v", err, h)
	}
}

func TestNames(t *testing.T) {
	if OpCreateTTL.String() != "createTTL" || OpCode(55).String() != "unknown 55" {
		t.Errorf("op names: %v %v", OpCreateTTL, OpCode(55))
	}
	if LastOpName(OpGetChildren2) != "GETC" || LastOpName(OpCode(55)) != "NA" {
		t.Error("LastOpName")
	}
	if StateExpired.String() != "Expired" || EventNone.String() != "None" ||
		EventNodeChildrenChanged.String() != "NodeChildrenChanged" || EventType(9).String() != "EventType(9)" {
		t.Error("state/event names")
	}
	if ops := OpCodes(); len(ops) != len(opNames) || ops[0] != OpCloseSession || ops[len(ops)-1] != OpWhoAmI {
		t.Errorf("OpCodes: %v", ops)
	}
	if CodeOf(nil) != vocab.OK || CodeOf(&vocab.Error{Code: vocab.BadVersion}) != vocab.BadVersion ||
		CodeOf(errors.New("x")) != vocab.SystemError {
		t.Error("CodeOf")
	}
}
