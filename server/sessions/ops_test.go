package sessions

import (
	"testing"

	"coord/fsm"
)

// The table of request kinds (ops.go) agrees with itself: every kind has a
// row with a name of its own; a kind is a write exactly when it has a
// command; read-only mode serves what is answered here (reads, pings,
// refusals) and refuses what goes through the leader (writes, sync,
// reconfig), except that a close ends a local session. The front ends are
// held to the table's ZooKeeper and gRPC columns by the server's
// TestOpTableZooKeeper and TestOpTableGRPC.
func TestOpTable(t *testing.T) {
	names := map[string]OpKind{}
	for _, k := range Kinds() {
		info := k.Info()
		if info.Name == "" {
			t.Errorf("kind %d has no row", k)
			continue
		}
		if prev, dup := names[info.Name]; dup {
			t.Errorf("kinds %d and %d are both named %q", prev, k, info.Name)
		}
		names[info.Name] = k
		if (info.Run == RunWrite) != (info.Cmd != 0) {
			t.Errorf("%v: run %d with command %v: a write, and only a write, has a command", k, info.Run, info.Cmd)
		}
		if info.Cmd == fsm.CmdCreateSession || info.Cmd == fsm.CmdAttachSession {
			t.Errorf("%v: %v is Connect's, never a request's", k, info.Cmd)
		}
		switch info.Run {
		case RunAnswer, RunRead:
			if info.ReadOnly != ROServed {
				t.Errorf("%v is answered here but read-only mode does not serve it", k)
			}
		default:
			want := RORefused
			if info.Cmd == fsm.CmdCloseSession {
				want = ROEndsLocal
			}
			if info.ReadOnly != want {
				t.Errorf("%v goes through the leader: read-only mode's rule is %d, want %d", k, info.ReadOnly, want)
			}
		}
	}
	if OpRefuse.Info().Run != RunAnswer || OpKind(200).Info().Run != RunAnswer || OpKind(200).String() != "unknown" {
		t.Error("a refusal, or a kind past the table, is not answered in place")
	}
}
