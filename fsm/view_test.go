package fsm

// Table tests for the reads, with ZooKeeper 3.8's ACL checks
// (FinalRequestProcessor): getData, getChildren and getAllChildrenNumber need
// READ; getACL needs READ or ADMIN and shows digest hashes only to ADMIN;
// exists needs nothing. Expectations were checked on a 3.8.0 server; see
// apply_test.go for the fixture and helpers.

import (
	"bytes"
	"slices"
	"testing"
)

func TestViewFreshTree(t *testing.T) {
	// A fresh ZooKeeper 3.8.0: every Stat field zero but numChildren and
	// cversion (2*0-numChildren: -1 for the root, -2 for /zookeeper, see
	// TestApplyCversionAsZooKeeperReportsIt), no data, and /zookeeper/config
	// world:anyone READ with aversion -1 (DataTree.addConfigNode sets its ACL
	// with version -1, which setACL stores as the aversion).
	v := New().View()
	rows := []struct {
		path string
		kids []string
		stat Stat
		acl  []ACL
	}{
		{"/", []string{"zookeeper"}, Stat{NumChildren: 1}, OpenACLUnsafe},
		{"/zookeeper", []string{"config", "quota"}, Stat{NumChildren: 2}, OpenACLUnsafe},
		{"/zookeeper/quota", []string{}, Stat{}, OpenACLUnsafe},
		{"/zookeeper/config", []string{}, Stat{Aversion: -1}, ReadACLUnsafe},
	}
	for _, row := range rows {
		data, st, err := v.GetData(row.path, nil)
		if err != nil || len(data) != 0 {
			t.Errorf("getData %s: %q, %v", row.path, data, err)
		}
		apSameStat(t, row.path, st, row.stat)
		kids, _, err := v.GetChildren(row.path, nil)
		if err != nil || !slices.Equal(kids, row.kids) {
			t.Errorf("getChildren %s: %v, %v; want %v", row.path, kids, err, row.kids)
		}
		if acl, _, _ := v.GetACL(row.path, nil); !slices.Equal(acl, row.acl) {
			t.Errorf("getACL %s: %v, want %v", row.path, acl, row.acl)
		}
	}
	if v.NodeCount() != 4 || v.LastZxid() != 0 || len(v.Sessions()) != 0 {
		t.Errorf("NodeCount %d LastZxid %v sessions %v", v.NodeCount(), v.LastZxid(), v.Sessions())
	}
	// getAllChildrenNumber: 3 under "/", 2 under /zookeeper (verified).
	for path, want := range map[string]int{"/": 3, "/zookeeper": 2, "/zookeeper/quota": 0} {
		if n, err := v.GetAllChildrenNumber(path, nil); n != want || err != nil {
			t.Errorf("getAllChildrenNumber %s = %d, %v; want %d", path, n, err, want)
		}
	}
}

func TestViewReads(t *testing.T) {
	r := newApFixture(t)
	r.ok(apCreate("/a/b/c", "c", ModePersistent))
	r.ok(apCreate("/ab", "", ModePersistent)) // a sibling whose name extends "a"
	// READ for bob, ADMIN for alice (verified: bob sees hashes redacted,
	// alice cannot read the data but sees the whole ACL).
	mixed := []ACL{{Perms: PermRead, ID: apBob}, {Perms: PermAdmin, ID: apAlice}}
	r.ok(apCreateACL("/mixed", mixed...))
	r.ok(apCreateACL("/writeonly", apACL(PermWrite, "world", "anyone")))
	r.ok(apCreateACL("/iponly", apACL(PermRead, "ip", "127.0.0.0/8")))
	// coord: IPv6 ACLs as in ZooKeeper 3.9.5+; 3.8.0 refuses "::1" (InvalidACL).
	r.ok(apCreateACL("/ip6", apACL(PermRead, "ip", "::1")))
	v := r.f.View()
	redacted := []ACL{{Perms: PermRead, ID: Id{Scheme: "digest", ID: "bob:x"}}, {Perms: PermAdmin, ID: Id{Scheme: "digest", ID: "alice:x"}}}
	lockedACL := apLocked

	type read struct {
		path string
		ids  []Id
	}
	t.Run("getData", func(t *testing.T) {
		for _, row := range []struct {
			read
			data string
			code Code
		}{
			{read{"/a", nil}, "a", OK},
			{read{"/", nil}, "", OK},
			{read{"", nil}, "", OK}, // "" is the root, as in ZooKeeper (verified)
			{read{"/locked", []Id{apAlice}}, "s", OK},
			{read{"/locked", []Id{apBob, apAlice}}, "s", OK},
			{read{"/locked", []Id{apSuper}}, "s", OK},
			{read{"/locked", nil}, "", NoAuth},
			{read{"/locked", []Id{apBob}}, "", NoAuth},
			{read{"/mixed", []Id{apBob}}, "", OK},
			{read{"/mixed", []Id{apAlice}}, "", NoAuth}, // ADMIN is not READ
			{read{"/writeonly", nil}, "", NoAuth},
			{read{"/iponly", []Id{apLocal}}, "", OK},
			{read{"/iponly", []Id{{Scheme: "ip", ID: "10.0.0.1"}}}, "", NoAuth},
			{read{"/iponly", nil}, "", NoAuth},
			{read{"/ip6", []Id{apLocal}}, "", NoAuth},
			{read{"/zookeeper/config", nil}, "", OK},
			{read{"/nope", []Id{apSuper}}, "", NoNode},
			{read{"/a/", nil}, "", NoNode}, // ZooKeeper answers an invalid path with NoNode (verified)
			{read{"a", nil}, "", NoNode},
			{read{"/a//b", nil}, "", NoNode},
		} {
			data, st, err := v.GetData(row.path, row.ids)
			apCode(t, "getData "+row.path, err, row.code)
			if row.code == OK && (string(data) != row.data || st.DataLength != int32(len(row.data))) {
				t.Errorf("getData %s = %q %+v, want %q", row.path, data, st, row.data)
			}
			if row.code != OK && (data != nil || st != (Stat{})) {
				t.Errorf("getData %s failed but returned %q %+v", row.path, data, st)
			}
		}
		// The Stat is the one exists returns.
		_, st, _ := v.GetData("/a/b", nil)
		want := Stat{Czxid: apZ(4), Mzxid: apZ(4), Pzxid: apRowZ, Ctime: apTime(4), Mtime: apTime(4), DataLength: 1, NumChildren: 1}
		apSameStat(t, "getData /a/b", st, want)
	})
	t.Run("exists needs no permission", func(t *testing.T) {
		for _, p := range []string{"/locked", "/writeonly", "/mixed", "/iponly", "/eph", ""} {
			if _, err := v.Exists(p); err != nil {
				t.Errorf("exists %s: %v", p, err)
			}
		}
		st, _ := v.Exists("/eph")
		apSameStat(t, "exists /eph", st, Stat{Czxid: apZ(5), Mzxid: apZ(5), Pzxid: apZ(5), Ctime: apTime(5), Mtime: apTime(5), DataLength: 1, EphemeralOwner: apS1})
		for _, p := range []string{"/nope", "/a/b/c/d", "/zookeeper/", "zookeeper"} {
			_, err := v.Exists(p)
			apCode(t, "exists "+p, err, NoNode)
		}
	})
	t.Run("getChildren", func(t *testing.T) {
		for _, row := range []struct {
			read
			kids []string
			code Code
		}{
			// coord: names come sorted; ZooKeeper's order is its HashSet's.
			{read{"/", nil}, []string{"a", "ab", "ctr", "eph", "ip6", "iponly", "locked", "mixed", "nocreate", "nodelete", "ttl", "writeonly", "zookeeper"}, OK},
			{read{"/a", nil}, []string{"b"}, OK},
			{read{"/a/b/c", nil}, []string{}, OK},
			{read{"/locked", []Id{apAlice}}, []string{"kid"}, OK},
			{read{"/locked", nil}, nil, NoAuth},
			{read{"/writeonly", nil}, nil, NoAuth},
			{read{"/mixed", []Id{apAlice}}, nil, NoAuth},
			{read{"/nope", nil}, nil, NoNode},
		} {
			kids, st, err := v.GetChildren(row.path, row.ids)
			apCode(t, "getChildren "+row.path, err, row.code)
			if !slices.Equal(kids, row.kids) || (row.code == OK && kids == nil) {
				t.Errorf("getChildren %s = %#v, want %#v", row.path, kids, row.kids)
			}
			if row.code == OK && st.NumChildren != int32(len(row.kids)) {
				t.Errorf("getChildren %s stat %+v", row.path, st)
			}
		}
	})
	t.Run("getACL", func(t *testing.T) {
		for _, row := range []struct {
			read
			acl  []ACL
			code Code
		}{
			{read{"/a", nil}, OpenACLUnsafe, OK},
			{read{"/mixed", []Id{apAlice}}, mixed, OK},        // ADMIN: the hashes
			{read{"/mixed", []Id{apBob}}, redacted, OK},       // READ only: redacted
			{read{"/mixed", []Id{apBob, apAlice}}, mixed, OK}, // both
			{read{"/mixed", []Id{apSuper}}, mixed, OK},
			{read{"/mixed", nil}, nil, NoAuth},
			{read{"/locked", []Id{apAlice}}, lockedACL, OK},
			{read{"/locked", nil}, nil, NoAuth},
			{read{"/locked", []Id{apBob}}, nil, NoAuth},
			{read{"/writeonly", nil}, nil, NoAuth}, // WRITE is not enough (verified)
			{read{"/nocreate", nil}, ReadACLUnsafe, OK},
			{read{"/zookeeper/config", nil}, ReadACLUnsafe, OK},
			{read{"/nope", []Id{apSuper}}, nil, NoNode},
		} {
			acl, st, err := v.GetACL(row.path, row.ids)
			apCode(t, "getACL "+row.path, err, row.code)
			if !slices.Equal(acl, row.acl) {
				t.Errorf("getACL %s as %v = %v, want %v", row.path, row.ids, acl, row.acl)
			}
			if row.code == OK && st.Czxid == 0 && row.path != "/zookeeper/config" {
				t.Errorf("getACL %s stat %+v", row.path, st)
			}
		}
		// The stored ACL is not changed by redacting a copy.
		if acl, _, _ := v.GetACL("/mixed", []Id{apSuper}); !slices.Equal(acl, mixed) {
			t.Errorf("after a redacted read the ACL is %v", acl)
		}
	})
	t.Run("getAllChildrenNumber", func(t *testing.T) {
		for _, row := range []struct {
			read
			n    int
			code Code
		}{
			{read{"/", nil}, 4 + 10 + 6 - 1, OK}, // every node but the root
			{read{"/a", nil}, 2, OK},             // /a/b and /a/b/c, not /ab
			{read{"/a/b", nil}, 1, OK},
			{read{"/a/b/c", nil}, 0, OK},
			{read{"/zookeeper", nil}, 2, OK},
			{read{"/locked", []Id{apAlice}}, 1, OK},
			{read{"/locked", nil}, 0, NoAuth}, // verified
			{read{"/nope", nil}, 0, NoNode},
		} {
			n, err := v.GetAllChildrenNumber(row.path, row.ids)
			apCode(t, "getAllChildrenNumber "+row.path, err, row.code)
			if n != row.n {
				t.Errorf("getAllChildrenNumber %s = %d, want %d", row.path, n, row.n)
			}
		}
	})
}

func TestViewGetEphemerals(t *testing.T) {
	// ZooKeeper's getEphemerals(prefix) keeps the paths that start with
	// prefix as strings ("/e" also matches "/eph"); "/" and "" mean all.
	r := newApFixture(t)
	r.ok(apAs(apS1, apCreate("/a/e1", "", ModeEphemeral)))
	q := r.ok(apAs(apS1, apCreate("/a/q-", "", ModeEphemeralSequential))).Path
	r.ok(apAs(apS2, apCreate("/a/e2", "", ModeEphemeral)))
	v := r.f.View()
	for _, row := range []struct {
		session int64
		prefix  string
		want    []string
	}{
		{apS1, "/", []string{"/a/e1", q, "/eph"}},
		{apS1, "", []string{"/a/e1", q, "/eph"}},
		{apS1, "/a", []string{"/a/e1", q}},
		{apS1, "/a/", []string{"/a/e1", q}},
		{apS1, "/e", []string{"/eph"}},
		{apS1, "/eph", []string{"/eph"}},
		{apS1, "/x", []string{}},
		{apS2, "/", []string{"/a/e2"}},
		{apS1 + 99, "/", []string{}},
	} {
		got := v.GetEphemerals(row.session, row.prefix)
		if got == nil || !slices.Equal(got, row.want) {
			t.Errorf("GetEphemerals(%#x, %q) = %#v, want %v", row.session, row.prefix, got, row.want)
		}
	}
	if s, ok := v.Session(apS1); !ok || s.Ephemerals != 3 || s.ID != apS1 || s.Timeout != 30000 {
		t.Errorf("Session(S1) = %+v, %v", s, ok)
	}
	if ss := v.Sessions(); len(ss) != 2 || ss[0].ID != apS1 || ss[1].ID != apS2 || ss[1].Ephemerals != 1 {
		t.Errorf("Sessions() = %+v", ss)
	}
	if _, ok := v.Session(0); ok {
		t.Errorf("Session(0) found")
	}
}

func TestViewIsImmutable(t *testing.T) {
	// A View is the state after some whole command: later commands, failed
	// multis included, never show through it.
	r := newApFixture(t)
	old := r.f.View()
	digest := old.Digest()
	r.ok(apSet("/a", "changed", -1))
	r.ok(apDelete("/a/b", -1))
	r.ok(apCreate("/new", "", ModePersistent))
	r.ok(apAuth(apSetACL("/nocreate", -1, OpenACLUnsafe...), apSuper))
	r.apply(apMulti(apCreate("/m", "", ModePersistent), apDelete("/nope", -1)))
	r.ok(Command{Type: CmdCloseSession, Session: apS1})
	if data, st, _ := old.GetData("/a", nil); string(data) != "a" || st.Version != 0 {
		t.Errorf("old view /a = %q %+v", data, st)
	}
	if _, err := old.Exists("/a/b"); err != nil {
		t.Errorf("old view lost /a/b: %v", err)
	}
	if _, err := old.Exists("/new"); err == nil {
		t.Errorf("old view sees /new")
	}
	if acl, _, _ := old.GetACL("/nocreate", nil); !slices.Equal(acl, ReadACLUnsafe) {
		t.Errorf("old view ACL %v", acl)
	}
	if e := old.GetEphemerals(apS1, "/"); !slices.Equal(e, []string{"/eph"}) {
		t.Errorf("old view ephemerals %v", e)
	}
	if int64(old.LastZxid()) != apZ(apFixtureLen) || old.NodeCount() != 14 {
		t.Errorf("old view LastZxid %v NodeCount %d", old.LastZxid(), old.NodeCount())
	}
	if old.Digest() != digest {
		t.Errorf("old view's digest changed")
	}
	// Taking a view without applying anything returns the same state.
	if a, b := r.f.View(), r.f.View(); a.Digest() != b.Digest() || a.LastZxid() != r.f.LastZxid() {
		t.Errorf("two views of one state differ")
	}
	// The current view has it all.
	data, _, _ := r.f.View().GetData("/a", nil)
	if !bytes.Equal(data, []byte("changed")) {
		t.Errorf("data %q", data)
	}
}

func TestViewContainerCandidatesAndExpiredTTLs(t *testing.T) {
	// ContainerManager's rules: a container is a candidate once it has had a
	// child and has none now (a never-used one stays); a ttl node once it has
	// no children and now - mtime > ttl.
	r := newApFixture(t)
	r.ok(apCreate("/c2", "", ModeContainer))
	r.ok(apCreate("/c2/k", "", ModePersistent))
	r.ok(apCreate("/c3", "", ModeContainer))
	r.ok(apCreate("/c3/k", "", ModePersistent))
	r.ok(apDelete("/c3/k", -1))
	r.ok(apCreateTTL("/t2", ModePersistentTTL, 10))
	t2 := r.now
	r.ok(apCreateTTL("/t3", ModePersistentTTL, 10))
	r.ok(apCreate("/t3/k", "", ModePersistent))
	v := r.f.View()
	if got := v.ContainerCandidates(); !slices.Equal(got, []string{"/c3"}) {
		t.Errorf("ContainerCandidates = %v, want [/c3]", got)
	}
	ttl := apTime(12) // /ttl: ttl 1000
	for _, row := range []struct {
		now  int64
		want []string
	}{
		{t2 + 10, nil},
		{t2 + 11, []string{"/t2"}},
		{ttl + 1000, []string{"/t2"}},
		{ttl + 1001, []string{"/t2", "/ttl"}},
	} {
		if got := v.ExpiredTTLs(row.now); !slices.Equal(got, row.want) {
			t.Errorf("ExpiredTTLs(t0+%d) = %v, want %v", row.now-apT0, got, row.want)
		}
	}
}
