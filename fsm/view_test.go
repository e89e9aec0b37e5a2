package fsm

// Table tests for the reads, with ZooKeeper 3.8's ACL checks
// (FinalRequestProcessor): getData, getChildren and getAllChildrenNumber need
// READ; getACL needs READ or ADMIN and shows digest hashes only to ADMIN;
// exists needs nothing. Expectations were checked on a 3.8.0 server; see
// apply_test.go for the fixture and helpers.

import (
	"bytes"
	"coord/vocab"
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
		stat vocab.Stat
		acl  []vocab.ACL
	}{
		{"/", []string{"zookeeper"}, vocab.Stat{NumChildren: 1}, vocab.OpenACLUnsafe},
		{"/zookeeper", []string{"config", "quota"}, vocab.Stat{NumChildren: 2}, vocab.OpenACLUnsafe},
		{"/zookeeper/quota", []string{}, vocab.Stat{}, vocab.OpenACLUnsafe},
		{"/zookeeper/config", []string{}, vocab.Stat{Aversion: -1}, vocab.ReadACLUnsafe},
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
	r.ok(apCreate("/a/b/c", "c", vocab.ModePersistent))
	r.ok(apCreate("/ab", "", vocab.ModePersistent)) // a sibling whose name extends "a"
	// READ for bob, ADMIN for alice (verified: bob sees hashes redacted,
	// alice cannot read the data but sees the whole ACL).
	mixed := []vocab.ACL{{Perms: vocab.PermRead, ID: apBob}, {Perms: vocab.PermAdmin, ID: apAlice}}
	r.ok(apCreateACL("/mixed", mixed...))
	r.ok(apCreateACL("/writeonly", apACL(vocab.PermWrite, "world", "anyone")))
	r.ok(apCreateACL("/iponly", apACL(vocab.PermRead, "ip", "127.0.0.0/8")))
	// coord: IPv6 ACLs as in ZooKeeper 3.9.5+; 3.8.0 refuses "::1" (InvalidACL).
	r.ok(apCreateACL("/ip6", apACL(vocab.PermRead, "ip", "::1")))
	v := r.f.View()
	redacted := []vocab.ACL{{Perms: vocab.PermRead, ID: vocab.Id{Scheme: "digest", ID: "bob:x"}}, {Perms: vocab.PermAdmin, ID: vocab.Id{Scheme: "digest", ID: "alice:x"}}}
	lockedACL := apLocked

	type read struct {
		path string
		ids  []vocab.Id
	}
	t.Run("getData", func(t *testing.T) {
		for _, row := range []struct {
			read
			data string
			code vocab.Code
		}{
			{read{"/a", nil}, "a", vocab.OK},
			{read{"/", nil}, "", vocab.OK},
			{read{"", nil}, "", vocab.OK}, // "" is the root, as in ZooKeeper (verified)
			{read{"/locked", []vocab.Id{apAlice}}, "s", vocab.OK},
			{read{"/locked", []vocab.Id{apBob, apAlice}}, "s", vocab.OK},
			{read{"/locked", []vocab.Id{apSuper}}, "s", vocab.OK},
			{read{"/locked", nil}, "", vocab.NoAuth},
			{read{"/locked", []vocab.Id{apBob}}, "", vocab.NoAuth},
			{read{"/mixed", []vocab.Id{apBob}}, "", vocab.OK},
			{read{"/mixed", []vocab.Id{apAlice}}, "", vocab.NoAuth}, // ADMIN is not READ
			{read{"/writeonly", nil}, "", vocab.NoAuth},
			{read{"/iponly", []vocab.Id{apLocal}}, "", vocab.OK},
			{read{"/iponly", []vocab.Id{{Scheme: "ip", ID: "10.0.0.1"}}}, "", vocab.NoAuth},
			{read{"/iponly", nil}, "", vocab.NoAuth},
			{read{"/ip6", []vocab.Id{apLocal}}, "", vocab.NoAuth},
			{read{"/zookeeper/config", nil}, "", vocab.OK},
			{read{"/nope", []vocab.Id{apSuper}}, "", vocab.NoNode},
			{read{"/a/", nil}, "", vocab.NoNode}, // ZooKeeper answers an invalid path with NoNode (verified)
			{read{"a", nil}, "", vocab.NoNode},
			{read{"/a//b", nil}, "", vocab.NoNode},
		} {
			data, st, err := v.GetData(row.path, row.ids)
			apCode(t, "getData "+row.path, err, row.code)
			if row.code == vocab.OK && (string(data) != row.data || st.DataLength != int32(len(row.data))) {
				t.Errorf("getData %s = %q %+v, want %q", row.path, data, st, row.data)
			}
			if row.code != vocab.OK && (data != nil || st != (vocab.Stat{})) {
				t.Errorf("getData %s failed but returned %q %+v", row.path, data, st)
			}
		}
		// The Stat is the one exists returns.
		_, st, _ := v.GetData("/a/b", nil)
		want := vocab.Stat{Czxid: apZ(4), Mzxid: apZ(4), Pzxid: apRowZ, Ctime: apTime(4), Mtime: apTime(4), DataLength: 1, NumChildren: 1}
		apSameStat(t, "getData /a/b", st, want)
	})
	t.Run("exists needs no permission", func(t *testing.T) {
		for _, p := range []string{"/locked", "/writeonly", "/mixed", "/iponly", "/eph", ""} {
			if _, err := v.Exists(p); err != nil {
				t.Errorf("exists %s: %v", p, err)
			}
		}
		st, _ := v.Exists("/eph")
		apSameStat(t, "exists /eph", st, vocab.Stat{Czxid: apZ(5), Mzxid: apZ(5), Pzxid: apZ(5), Ctime: apTime(5), Mtime: apTime(5), DataLength: 1, EphemeralOwner: apS1})
		for _, p := range []string{"/nope", "/a/b/c/d", "/zookeeper/", "zookeeper"} {
			_, err := v.Exists(p)
			apCode(t, "exists "+p, err, vocab.NoNode)
		}
	})
	t.Run("getChildren", func(t *testing.T) {
		for _, row := range []struct {
			read
			kids []string
			code vocab.Code
		}{
			// coord: names come sorted; ZooKeeper's order is its HashSet's.
			{read{"/", nil}, []string{"a", "ab", "ctr", "eph", "ip6", "iponly", "locked", "mixed", "nocreate", "nodelete", "ttl", "writeonly", "zookeeper"}, vocab.OK},
			{read{"/a", nil}, []string{"b"}, vocab.OK},
			{read{"/a/b/c", nil}, []string{}, vocab.OK},
			{read{"/locked", []vocab.Id{apAlice}}, []string{"kid"}, vocab.OK},
			{read{"/locked", nil}, nil, vocab.NoAuth},
			{read{"/writeonly", nil}, nil, vocab.NoAuth},
			{read{"/mixed", []vocab.Id{apAlice}}, nil, vocab.NoAuth},
			{read{"/nope", nil}, nil, vocab.NoNode},
		} {
			kids, st, err := v.GetChildren(row.path, row.ids)
			apCode(t, "getChildren "+row.path, err, row.code)
			if !slices.Equal(kids, row.kids) || (row.code == vocab.OK && kids == nil) {
				t.Errorf("getChildren %s = %#v, want %#v", row.path, kids, row.kids)
			}
			if row.code == vocab.OK && st.NumChildren != int32(len(row.kids)) {
				t.Errorf("getChildren %s stat %+v", row.path, st)
			}
		}
	})
	t.Run("getACL", func(t *testing.T) {
		for _, row := range []struct {
			read
			acl  []vocab.ACL
			code vocab.Code
		}{
			{read{"/a", nil}, vocab.OpenACLUnsafe, vocab.OK},
			{read{"/mixed", []vocab.Id{apAlice}}, mixed, vocab.OK},        // ADMIN: the hashes
			{read{"/mixed", []vocab.Id{apBob}}, redacted, vocab.OK},       // READ only: redacted
			{read{"/mixed", []vocab.Id{apBob, apAlice}}, mixed, vocab.OK}, // both
			{read{"/mixed", []vocab.Id{apSuper}}, mixed, vocab.OK},
			{read{"/mixed", nil}, nil, vocab.NoAuth},
			{read{"/locked", []vocab.Id{apAlice}}, lockedACL, vocab.OK},
			{read{"/locked", nil}, nil, vocab.NoAuth},
			{read{"/locked", []vocab.Id{apBob}}, nil, vocab.NoAuth},
			{read{"/writeonly", nil}, nil, vocab.NoAuth}, // WRITE is not enough (verified)
			{read{"/nocreate", nil}, vocab.ReadACLUnsafe, vocab.OK},
			{read{"/zookeeper/config", nil}, vocab.ReadACLUnsafe, vocab.OK},
			{read{"/nope", []vocab.Id{apSuper}}, nil, vocab.NoNode},
		} {
			acl, st, err := v.GetACL(row.path, row.ids)
			apCode(t, "getACL "+row.path, err, row.code)
			if !slices.Equal(acl, row.acl) {
				t.Errorf("getACL %s as %v = %v, want %v", row.path, row.ids, acl, row.acl)
			}
			if row.code == vocab.OK && st.Czxid == 0 && row.path != "/zookeeper/config" {
				t.Errorf("getACL %s stat %+v", row.path, st)
			}
		}
		// The stored ACL is not changed by redacting a copy.
		if acl, _, _ := v.GetACL("/mixed", []vocab.Id{apSuper}); !slices.Equal(acl, mixed) {
			t.Errorf("after a redacted read the ACL is %v", acl)
		}
	})
	t.Run("getAllChildrenNumber", func(t *testing.T) {
		for _, row := range []struct {
			read
			n    int
			code vocab.Code
		}{
			{read{"/", nil}, 4 + 10 + 6 - 1, vocab.OK}, // every node but the root
			{read{"/a", nil}, 2, vocab.OK},             // /a/b and /a/b/c, not /ab
			{read{"/a/b", nil}, 1, vocab.OK},
			{read{"/a/b/c", nil}, 0, vocab.OK},
			{read{"/zookeeper", nil}, 2, vocab.OK},
			{read{"/locked", []vocab.Id{apAlice}}, 1, vocab.OK},
			{read{"/locked", nil}, 0, vocab.NoAuth}, // verified
			{read{"/nope", nil}, 0, vocab.NoNode},
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
	r.ok(apAs(apS1, apCreate("/a/e1", "", vocab.ModeEphemeral)))
	q := r.ok(apAs(apS1, apCreate("/a/q-", "", vocab.ModeEphemeralSequential))).Path
	r.ok(apAs(apS2, apCreate("/a/e2", "", vocab.ModeEphemeral)))
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
	r.ok(apCreate("/new", "", vocab.ModePersistent))
	r.ok(apAuth(apSetACL("/nocreate", -1, vocab.OpenACLUnsafe...), apSuper))
	r.apply(apMulti(apCreate("/m", "", vocab.ModePersistent), apDelete("/nope", -1)))
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
	if acl, _, _ := old.GetACL("/nocreate", nil); !slices.Equal(acl, vocab.ReadACLUnsafe) {
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
	r.ok(apCreate("/c2", "", vocab.ModeContainer))
	r.ok(apCreate("/c2/k", "", vocab.ModePersistent))
	r.ok(apCreate("/c3", "", vocab.ModeContainer))
	r.ok(apCreate("/c3/k", "", vocab.ModePersistent))
	r.ok(apDelete("/c3/k", -1))
	r.ok(apCreateTTL("/t2", vocab.ModePersistentTTL, 10))
	t2 := r.now
	r.ok(apCreateTTL("/t3", vocab.ModePersistentTTL, 10))
	r.ok(apCreate("/t3/k", "", vocab.ModePersistent))
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
