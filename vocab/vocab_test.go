package vocab

import (
	"errors"
	"fmt"
	"testing"
)

func TestCodeString(t *testing.T) {
	for c, want := range map[Code]string{
		OK:        "ok",
		NoNode:    "node does not exist",
		Throttled: "request throttled",
		Code(-99): "unknown error code -99",
	} {
		if got := c.String(); got != want {
			t.Errorf("Code(%d).String() = %q, want %q", int32(c), got, want)
		}
		if c.Error() != c.String() {
			t.Errorf("Code(%d).Error() = %q, want its String", int32(c), c.Error())
		}
	}
}

func TestErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		e    *Error
		want string
	}{
		{&Error{Code: NoNode, Op: "delete", Path: "/a"}, "delete /a: node does not exist"},
		{&Error{Code: NoNode, Path: "/a"}, "/a: node does not exist"},
		{&Error{Code: BadVersion, Op: "setData"}, "setData: bad version"},
		{&Error{Code: SessionExpired}, "session expired"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%#v.Error() = %q, want %q", tc.e, got, tc.want)
		}
	}
}

func TestErrorIsAndAs(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &Error{Code: NodeExists, Op: "create", Path: "/a"})
	if !errors.Is(err, NodeExists) {
		t.Error("errors.Is(err, NodeExists) = false")
	}
	if !errors.Is(err, &Error{Code: NodeExists}) {
		t.Error("errors.Is(err, &Error{Code: NodeExists}) = false")
	}
	if errors.Is(err, NoNode) || errors.Is(err, &Error{Code: NoNode}) {
		t.Error("errors.Is matches another code")
	}
	var c Code
	if !errors.As(err, &c) || c != NodeExists {
		t.Errorf("errors.As(err, &code) gives %v, want NodeExists", c)
	}
	var e *Error
	if !errors.As(err, &e) || e.Path != "/a" {
		t.Errorf("errors.As(err, &e) gives %#v", e)
	}
}

func TestCodeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Code
	}{
		{nil, OK},
		{BadArguments, BadArguments},
		{&Error{Code: NotEmpty}, NotEmpty},
		{fmt.Errorf("x: %w", &Error{Code: NoAuth}), NoAuth},
		{errors.New("plain"), SystemError},
	} {
		if got := CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestCreateModePredicates(t *testing.T) {
	type preds struct{ valid, seq, eph, ttl, container bool }
	for m, want := range map[CreateMode]preds{
		ModePersistent:              {valid: true},
		ModeEphemeral:               {valid: true, eph: true},
		ModePersistentSequential:    {valid: true, seq: true},
		ModeEphemeralSequential:     {valid: true, seq: true, eph: true},
		ModeContainer:               {valid: true, container: true},
		ModePersistentTTL:           {valid: true, ttl: true},
		ModePersistentSequentialTTL: {valid: true, seq: true, ttl: true},
		CreateMode(-1):              {},
		CreateMode(7):               {},
	} {
		got := preds{m.Valid(), m.IsSequential(), m.IsEphemeral(), m.IsTTL(), m.IsContainer()}
		if got != want {
			t.Errorf("mode %d: got %+v, want %+v", int32(m), got, want)
		}
	}
}

func TestCommonACLs(t *testing.T) {
	if PermAll != 0x1f {
		t.Errorf("PermAll = %#x, want 0x1f", int32(PermAll))
	}
	if len(OpenACLUnsafe) != 1 || OpenACLUnsafe[0] != (ACL{Perms: PermAll, ID: Id{Scheme: "world", ID: "anyone"}}) {
		t.Errorf("OpenACLUnsafe = %v", OpenACLUnsafe)
	}
	if len(ReadACLUnsafe) != 1 || ReadACLUnsafe[0] != (ACL{Perms: PermRead, ID: AnyoneID}) {
		t.Errorf("ReadACLUnsafe = %v", ReadACLUnsafe)
	}
	if len(CreatorAllACL) != 1 || CreatorAllACL[0] != (ACL{Perms: PermAll, ID: Id{Scheme: "auth"}}) {
		t.Errorf("CreatorAllACL = %v", CreatorAllACL)
	}
}

func TestEventAndStateNames(t *testing.T) {
	for _, tc := range []struct {
		s    fmt.Stringer
		want string
	}{
		{EventNodeCreated, "NodeCreated"},
		{EventNodeChildrenChanged, "NodeChildrenChanged"},
		{EventType(9), "EventType(?)"},
		{StateSyncConnected, "SyncConnected"},
		{StateExpired, "Expired"},
		{StateSASLAuthenticated, "SaslAuthenticated"},
		{KeeperState(2), "KeeperState(2)"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%v: String() = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestDigestID(t *testing.T) {
	tests := []struct{ user, password, want string }{
		// From ZooKeeper's administrator guide (super user digest).
		{"super", "test", "super:D/InIHSb7yEEbrWz8b9l71RjZJU="},
		{"bob", "secret", "bob:fyVmFCwVbTJYrznoSu1koqYEYF0="},
		{"zk", "zk", "zk:wv1gAVH8RiWIJUyaveCTg5AdOP0="},
		{"üser", "pässword", "üser:S/LHSCEmmE6GVxI+xd586A6+JlE="},
		{"user", "", "user:kd7q5xGKLW+18xQTfO8iqRaFvsM="},
		{"", "pw", ":krPDEYdCl854cFNT6IXnoMv+VVA="},
		// The name is cut at its first ':'; the hash covers "a:b:c".
		{"a:b", "c", "a:cLzgnoJ6mP5qz3w+mwvPE2vDgu0="},
		{"a", "b:c", "a:cLzgnoJ6mP5qz3w+mwvPE2vDgu0="},
	}
	for _, tc := range tests {
		if got := DigestID(tc.user, tc.password); got != tc.want {
			t.Errorf("DigestID(%q, %q) = %q, want %q", tc.user, tc.password, got, tc.want)
		}
	}
}
