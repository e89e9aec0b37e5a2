package zkfront

import (
	"testing"
	"time"

	"coord/server/sessions"
	"coord/vocab"
	"coord/zk"
)

// The session layer's table of request kinds (server/sessions, ops.go) is
// the one statement of what each request is: its name, whether it is a
// write, what read-only mode does with it, and which ZooKeeper op codes
// become it. This test holds the ZooKeeper front end to it (package
// server's ops_test.go the gRPC one): every op code maps to the kind whose
// row names it, and a request carries a write (Write, or a multi's Writes)
// exactly when its kind is a write, of the row's command type.

// zkNotRequests are the op codes ZooKeeper defines that no client sends as
// a request: the connect handshake and two codes of replies.
var zkNotRequests = map[zk.OpCode]string{
	zk.OpCreateSession: "the connect handshake (sessions.Layer.Connect)",
	zk.OpNotification:  "a watch event's code",
	zk.OpError:         "a failed op's result in a multi reply",
}

func TestOpTableZooKeeper(t *testing.T) {
	rows := map[string]sessions.OpKind{}
	for _, k := range sessions.Kinds() {
		for _, name := range k.Info().ZooKeeper {
			if prev, dup := rows[name]; dup {
				t.Errorf("op code %s is in the rows of both %v and %v", name, prev, k)
			}
			rows[name] = k
		}
	}
	for _, op := range zk.OpCodes() {
		want, listed := rows[op.String()]
		if why, ok := zkNotRequests[op]; ok {
			if listed {
				t.Errorf("op code %s (%s) is in the row of %v", op, why, want)
			}
			continue
		}
		if !listed {
			t.Errorf("op code %s is in no row of the session layer's table", op)
			continue
		}
		body, err := zk.NewRequest(op)
		if err != nil {
			t.Errorf("zk.NewRequest(%s): %v", op, err)
			continue
		}
		// With SASL users, so that sasl is served and not refused for want
		// of them.
		req, _ := translate(zk.RequestHeader{Xid: 1, Type: op}, body, nil, time.Time{}, true)
		if req.Kind != want {
			t.Errorf("the ZooKeeper front end turns %s into %v; the table says %v", op, req.Kind, want)
			continue
		}
		if want == sessions.OpRefuse && req.Code != vocab.Unimplemented {
			t.Errorf("%s is refused with %v, want Unimplemented", op, req.Code)
		}
		if err := req.WriteMismatch(); err != nil {
			t.Errorf("%s: %v", "ZooKeeper "+op.String(), err)
		}
	}
}
