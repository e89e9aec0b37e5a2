package fsm

import (
	"bytes"
	"coord/vocab"
	"errors"
	"testing"
)

// A session belongs to one connection at a time: commands from the
// connection it moved away from fail with SessionMoved and change nothing,
// as in ZooKeeper; the leader's own commands (no owner) always apply.
func TestSessionOwner(t *testing.T) {
	f := New()
	r, _ := f.Apply(1, &Command{Type: CmdCreateSession, Timeout: 5000, Owner: "s1/1"})
	sid := r.SessionID
	create := func(path, owner string) error {
		r, _ := f.Apply(1, &Command{Type: CmdCreate, Session: sid, Owner: owner,
			Op: Op{Type: CmdCreate, Path: path, ACL: vocab.OpenACLUnsafe}})
		return r.Err
	}
	if err := create("/a", "s1/1"); err != nil {
		t.Fatalf("create by the owner: %v", err)
	}
	if r, _ := f.Apply(1, &Command{Type: CmdAttachSession, Session: sid, Owner: "s2/7"}); r.Err != nil {
		t.Fatalf("attach: %v", r.Err)
	}
	if info, _ := f.View().Session(sid); info.Owner != "s2/7" {
		t.Fatalf("owner after attach: %q", info.Owner)
	}
	if err := create("/stale", "s1/1"); !errors.Is(err, vocab.SessionMoved) {
		t.Fatalf("create from the old connection: %v", err)
	}
	if r, _ := f.Apply(1, &Command{Type: CmdCloseSession, Session: sid, Owner: "s1/1"}); !errors.Is(r.Err, vocab.SessionMoved) {
		t.Fatalf("close from the old connection: %v", r.Err)
	}
	// A refused command consumes its zxid only: compare all but the clock.
	v := f.View()
	if _, err := v.Exists("/stale"); err == nil {
		t.Fatal("the stale create took effect")
	}
	if _, ok := v.Session(sid); !ok {
		t.Fatal("the stale close took effect")
	}
	if err := create("/fresh", "s2/7"); err != nil {
		t.Fatalf("create by the new owner: %v", err)
	}
	if err := create("/duty", ""); err != nil {
		t.Fatalf("a command without an owner: %v", err)
	}
	if r, _ := f.Apply(1, &Command{Type: CmdAttachSession, Session: 0x7777, Owner: "s3/1"}); !errors.Is(r.Err, vocab.SessionExpired) {
		t.Fatalf("attach of an unknown session: %v", r.Err)
	}

	// The owner survives a snapshot.
	var buf bytes.Buffer
	if _, err := f.View().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	g := New()
	if err := g.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if info, _ := g.View().Session(sid); info.Owner != "s2/7" {
		t.Fatalf("owner after restore: %q", info.Owner)
	}
	if r, _ := g.Apply(1, &Command{Type: CmdCloseSession, Session: sid}); r.Err != nil {
		t.Fatalf("expiry (no owner) after restore: %v", r.Err)
	}
}
