package server

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/fsm"
)

// Bad input gets a clear error and breaks nothing else: an unknown session,
// a wrong password, a client ahead of the server, an oversize request, a
// bad path, oversize data.
func TestBadInput(t *testing.T) {
	c := NewTestCluster(t, 1, 0)
	addr := c.Servers[0].GRPCAddr()
	good := newSession(t, addr)
	mustOK(t, good.create("/ok", "", fsm.ModePersistent))

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

	if r := good.create("no-slash", "", fsm.ModePersistent); fsm.Code(r.Err) != fsm.BadArguments {
		t.Fatalf("bad path: %v", fsm.Code(r.Err))
	}
	if r := good.create("/big", strings.Repeat("x", fsm.DefaultMaxDataBytes+1), fsm.ModePersistent); fsm.Code(r.Err) != fsm.BadArguments {
		t.Fatalf("oversize data: %v", fsm.Code(r.Err))
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
	if r := good.get("/huge", false); fsm.Code(r.Err) != fsm.NoNode {
		t.Fatalf("oversize request left %v", r)
	}
}
