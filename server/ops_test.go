package server

import (
	"testing"

	"coord/api"
	"coord/server/sessions"
	"coord/vocab"
)

// The session layer's table of request kinds (server/sessions, ops.go) is
// the one statement of what each request is: its name, whether it is a
// write, what read-only mode does with it, and which ZooKeeper op codes and
// which gRPC request become it. This test holds the gRPC front end to it
// (server/zkfront's ops_test.go the ZooKeeper one): every field of
// api.Request maps to the kind whose row names it, and a request carries a
// write (Write, or a multi's Writes) exactly when its kind is a write, of
// the row's command type.

func TestOpTableGRPC(t *testing.T) {
	rows := map[string]sessions.OpKind{}
	for _, k := range sessions.Kinds() {
		if name := k.Info().GRPC; name != "" {
			if prev, dup := rows[name]; dup {
				t.Errorf("api.Request field %s is in the rows of both %v and %v", name, prev, k)
			}
			rows[name] = k
		}
	}
	fields := (&api.Request{}).ProtoReflect().Descriptor().Oneofs().ByName("op").Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		want, listed := rows[string(fd.Name())]
		if !listed {
			t.Errorf("api.Request field %s is in no row of the session layer's table", fd.Name())
			continue
		}
		r := &api.Request{Xid: 1}
		m := r.ProtoReflect()
		m.Set(fd, m.NewField(fd))
		req := requestFromAPI(r)
		if req.Kind != want {
			t.Errorf("the gRPC front end turns %s into %v; the table says %v", fd.Name(), req.Kind, want)
			continue
		}
		if err := req.WriteMismatch(); err != nil {
			t.Errorf("%s: %v", "gRPC "+string(fd.Name()), err)
		}
	}
	if req := requestFromAPI(&api.Request{Xid: 1}); req.Kind != sessions.OpRefuse || req.Code != vocab.Unimplemented {
		t.Errorf("a request with no op: %v %v, want refused Unimplemented", req.Kind, req.Code)
	}
}
