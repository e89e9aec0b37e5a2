package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/vocab"
)

// Bad input gets a clear error and breaks nothing else: an unknown session,
// a wrong password, a client ahead of the server, an oversize request, a
// bad path, oversize data.
func TestBadInput(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 1, 0)
	addr := c.Servers[0].GRPCAddr()
	good := newSession(t, addr)
	mustOK(t, good.create("/ok", "", vocab.ModePersistent))

	wantCode := func(name string, err error, code codes.Code) {
		t.Helper()
		if status.Code(err) != code {
			t.Fatalf("%s: got %v, want %v", name, err, code)
		}
	}
	_, err := dialSession(t, addr, &api.ConnectRequest{SessionId: 0x7777, Password: make([]byte, 16), TimeoutMs: 5000})
	wantCode("unknown session", err, codes.NotFound)
	_, err = dialSession(t, addr, &api.ConnectRequest{SessionId: good.id, Password: []byte("wrong password!!"), TimeoutMs: 5000})
	wantCode("wrong password", err, codes.Unauthenticated)
	_, err = dialSession(t, addr, &api.ConnectRequest{SessionId: good.id, Password: good.pw, TimeoutMs: 5000, LastZxid: 1 << 40})
	wantCode("client ahead of the server", err, codes.FailedPrecondition)

	if r := good.create("no-slash", "", vocab.ModePersistent); vocab.Code(r.Err) != vocab.BadArguments {
		t.Fatalf("bad path: %v", vocab.Code(r.Err))
	}
	if r := good.create("/big", strings.Repeat("x", DefaultMaxDataBytes+1), vocab.ModePersistent); vocab.Code(r.Err) != vocab.BadArguments {
		t.Fatalf("oversize data: %v", vocab.Code(r.Err))
	}

	// A request over the message limit ends only its own stream.
	huge := newSession(t, addr)
	huge.xid++
	err = huge.stream.Send(&api.ClientMessage{Msg: &api.ClientMessage_Request{Request: &api.Request{Xid: huge.xid,
		Op: &api.Request_Create{Create: &api.CreateRequest{Path: "/huge", Data: make([]byte, 3<<20)}}}}})
	if err == nil {
		_, err = huge.stream.Recv()
	}
	wantCode("oversize request", err, codes.ResourceExhausted)

	mustOK(t, good.get("/ok", false))
	if r := good.get("/huge", false); vocab.Code(r.Err) != vocab.NoNode {
		t.Fatalf("oversize request left %v", r)
	}
}

// Issue 12, defect 5: the data limit is each server's setting, checked
// before the log, so servers configured differently never diverge: data
// one server accepts is applied by all, including one with a lower limit,
// and data a server refuses changes nothing anywhere.
func TestDataLimitIsCheckedBeforeTheLog(t *testing.T) {
	c := emptyCluster(t)
	for i := 0; i < 3; i++ {
		cfg := testConfig(t, fmt.Sprintf("s%d", i+1))
		if i == 0 {
			cfg.Bootstrap = true
			cfg.MaxDataBytes = 16 // the others keep the default, 1 MiB
		} else {
			first := c.Servers[0]
			cfg.Peers = []Peer{{ID: first.ID(), RaftAddr: first.RaftAddr(), GRPCAddr: first.GRPCAddr()}}
		}
		c.Start(cfg)
	}
	c.WaitMembers(3, 0)
	small := newSession(t, c.Servers[0].GRPCAddr())
	big := newSession(t, c.Servers[1].GRPCAddr())

	mustOK(t, big.create("/big", strings.Repeat("b", 100), vocab.ModePersistent))
	mustOK(t, big.set("/big", strings.Repeat("c", 200)))
	mustOK(t, big.do(&api.Request{Op: &api.Request_Multi{Multi: &api.MultiRequest{Ops: []*api.MultiOp{
		{Op: &api.MultiOp_Create{Create: &api.CreateRequest{Path: "/m", Data: make([]byte, 50),
			Acl: []*api.ACL{{Perms: int32(vocab.PermAll), Id: &api.Id{Scheme: "world", Id: "anyone"}}}}}},
	}}}}))

	// The server with the low limit refuses; its client stays connected.
	r := small.create("/small", strings.Repeat("s", 17), vocab.ModePersistent)
	if vocab.Code(r.Err) != vocab.BadArguments || r.ErrPath != "/small" {
		t.Fatalf("17 bytes on a server with a 16-byte limit: %v %q", vocab.Code(r.Err), r.ErrPath)
	}
	if r := small.set("/big", strings.Repeat("s", 17)); vocab.Code(r.Err) != vocab.BadArguments {
		t.Fatalf("setData over the limit: %v", vocab.Code(r.Err))
	}
	r = small.do(&api.Request{Op: &api.Request_Multi{Multi: &api.MultiRequest{Ops: []*api.MultiOp{
		{Op: &api.MultiOp_Check{Check: &api.CheckRequest{Path: "/big", Version: 1}}},
		{Op: &api.MultiOp_SetData{SetData: &api.SetDataRequest{Path: "/big", Data: make([]byte, 17), Version: -1}}},
		{Op: &api.MultiOp_Delete{Delete: &api.DeleteRequest{Path: "/m", Version: -1}}},
	}}}})
	var codes []vocab.Code
	for _, res := range r.GetMulti().GetResults() {
		codes = append(codes, vocab.Code(res.Err))
	}
	if vocab.Code(r.Err) != vocab.BadArguments || !slices.Equal(codes, []vocab.Code{vocab.OK, vocab.BadArguments, vocab.RuntimeInconsistency}) {
		t.Fatalf("multi over the limit: %v %v", vocab.Code(r.Err), codes)
	}
	mustOK(t, small.create("/small", strings.Repeat("s", 16), vocab.ModePersistent))

	c.WaitConverged()
	for _, s := range c.Servers {
		v := s.View()
		data, st, err := v.GetData("/big", nil)
		if err != nil || len(data) != 200 || st.Version != 1 {
			t.Fatalf("%s: /big holds %d bytes at version %d (%v)", s.ID(), len(data), st.Version, err)
		}
		if _, err := v.Exists("/m"); err != nil {
			t.Fatalf("%s: /m: %v", s.ID(), err)
		}
	}
}
