package fsm

import (
	"bytes"
	"coord/vocab"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// ACL order, as Apache ZooKeeper 3.8.0 keeps it: the client's order with
// exact duplicates dropped (first kept), "auth" expanded in place in the
// iteration order of the connection's id set, never sorted.

// zkUsers turns user names into the ids a ZooKeeper connection from
// 127.0.0.1 holds after addAuth("digest", user+":pw") for each, in order.
func zkUsers(users []string) []vocab.Id {
	ids := []vocab.Id{{Scheme: "ip", ID: "127.0.0.1"}}
	for _, u := range users {
		ids = append(ids, vocab.Id{Scheme: "digest", ID: vocab.DigestID(u, "pw")})
	}
	return ids
}

func digestUsers(ids []vocab.Id) []string {
	var out []string
	for _, id := range ids {
		if id.Scheme == "digest" {
			user, _, _ := strings.Cut(id.ID, ":")
			out = append(out, user)
		}
	}
	return out
}

// TestZKAuthOrder checks zkAuthOrder against orders recorded from ZooKeeper
// 3.8.0 (Debian's package, OpenJDK 17): a client on 127.0.0.1 added the
// users in the first list, created a node with ACL auth:ALL and read it
// back with getACL, which gave the second list.
func TestZKAuthOrder(t *testing.T) {
	tests := []struct {
		name       string
		added, got string
	}{
		{"seven", "u5 u1 u9 u3 carol alice bob",
			"bob u9 u3 carol u5 u1 alice"},
		// Resizes at 12 and 24 ids.
		{"fourteen", "user07 user03 user12 user01 user14 user09 user05 user11 user02 user08 user13 user04 user10 user06",
			"user05 user12 user10 user09 user14 user08 user06 user01 user11 user13 user04 user03 user02 user07"},
		// All in one bin of 16: the ninth grows the table instead of
		// making a tree bin.
		{"one bin of 16", "c35 c47 c76 c88 c127 c130 c140 c143 c160 c183",
			"c76 c88 c127 c183 c140 c35 c160 c143 c130 c47"},
		// The t* users share a bin of 1024: a tree bin once the table
		// has 64 bins, later ones put first.
		{"tree bin", "t451 t1690 t1784 t3877 t5259 t6693 t6965 t9976 t10152 " +
			"b0 b1 b2 b3 b4 b5 b6 b7 b8 b9 b10 b11 b12 b13 b14 b15 b16 b17 b18 b19 b20 b21 b22 b23 b24 b25 b26 b27 b28 b29 " +
			"t10688 t11676 t13140 t13610 t14293 t14734 t15946 t16224 t17210 t17310 t18134",
			"b13 b29 b12 b14 b5 b15 b25 b10 b17 b24 b2 b7 b6 b11 b27 b18 b19 b23 b3 b8 " +
				"t18134 t17310 t17210 t16224 t15946 t14734 t14293 t13610 t13140 t11676 " +
				"t451 t1690 t1784 t3877 t5259 t6693 t6965 t9976 t10152 t10688 " +
				"b0 b9 b4 b26 b28 b16 b21 b1 b20 b22"},
	}
	for _, tc := range tests {
		ids := zkUsers(strings.Fields(tc.added))
		before := slices.Clone(ids)
		got := zkAuthOrder(ids)
		if !slices.Equal(ids, before) {
			t.Errorf("%s: zkAuthOrder modified its input", tc.name)
		}
		if len(got) != len(ids) {
			t.Errorf("%s: %d ids in, %d out", tc.name, len(ids), len(got))
		}
		if users := strings.Join(digestUsers(got), " "); users != tc.got {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, users, tc.got)
		}
		// Through FixupACL, as a create with ACL auth:ALL.
		acl, err := FixupACL(vocab.CreatorAllACL, ids)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var users []string
		for _, a := range acl {
			users = append(users, strings.SplitN(a.ID.ID, ":", 2)[0])
		}
		if strings.Join(users, " ") != tc.got {
			t.Errorf("%s: FixupACL expanded auth to %v", tc.name, users)
		}
	}
}

func TestZKAuthOrderRepeats(t *testing.T) {
	a, b := zkUsers([]string{"alice"})[1], zkUsers([]string{"bob"})[1]
	ip := vocab.Id{Scheme: "ip", ID: "127.0.0.1"}
	if got := zkAuthOrder([]vocab.Id{ip, a, b, a, ip, b}); !slices.Equal(got, []vocab.Id{b, ip, a}) {
		t.Errorf("repeats: %v", got)
	}
	// Long lists look repeats up in a map; the result is the same.
	var many []vocab.Id
	for i := range 40 {
		many = append(many, vocab.Id{Scheme: "digest", ID: fmt.Sprintf("u%d:h", i%25)})
	}
	if got, want := zkAuthOrder(many), zkAuthOrder(many[:25]); !slices.Equal(got, want) {
		t.Errorf("40 ids with 15 repeats: %v, want %v", got, want)
	}
	if got := zkAuthOrder(nil); len(got) != 0 {
		t.Errorf("no ids: %v", got)
	}
}

// The values are Java 17's.
func TestJavaStringHash(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"hello", 99162322},
		{"digest", -1331913276},
		{"polygenelubricants", -2147483648},
		{"é", 233},
		{"😀", 55357*31 + 56832}, // U+1F600 is the pair D83D DE00
	} {
		if got := javaStringHash(tc.s); got != tc.want {
			t.Errorf("javaStringHash(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
	// new Id("ip", "127.0.0.1").hashCode() with ZooKeeper 3.8.0's jute.
	if got := javaIDHash(vocab.Id{Scheme: "ip", ID: "127.0.0.1"}); got != 1506146057 {
		t.Errorf("javaIDHash(ip:127.0.0.1) = %d", got)
	}
}

// What ZooKeeper 3.8.0 stored for each request (checked with getACL).
func TestFixupACLKeepsZooKeeperOrder(t *testing.T) {
	zed, amy := acl1(vocab.PermAll, "digest", vocab.DigestID("zed", "z")), acl1(vocab.PermRead|vocab.PermWrite, "digest", vocab.DigestID("amy", "a"))
	wr, ww := acl1(vocab.PermRead, "world", "anyone"), acl1(vocab.PermWrite, "world", "anyone")
	net8, host := acl1(vocab.PermRead, "ip", "10.0.0.0/8"), acl1(vocab.PermRead, "ip", "1.2.3.4")
	ids := zkUsers(strings.Fields("u5 u1 u9 u3 carol alice bob"))
	expanded := func(p vocab.Perm) []vocab.ACL { // bob u9 u3 carol u5 u1 alice
		var out []vocab.ACL
		for _, u := range strings.Fields("bob u9 u3 carol u5 u1 alice") {
			out = append(out, acl1(p, "digest", vocab.DigestID(u, "pw")))
		}
		return out
	}
	u1 := acl1(vocab.PermAll, "digest", vocab.DigestID("u1", "pw"))
	tests := []struct {
		name      string
		acl, want []vocab.ACL
	}{
		{"client order, not sorted", []vocab.ACL{net8, zed, wr, amy}, []vocab.ACL{net8, zed, wr, amy}},
		{"duplicates dropped, first kept", []vocab.ACL{wr, zed, wr, ww, zed, host, wr}, []vocab.ACL{wr, zed, ww, host}},
		{"auth in place", []vocab.ACL{wr, acl1(vocab.PermAll, "auth", ""), host},
			slices.Concat([]vocab.ACL{wr}, expanded(vocab.PermAll), []vocab.ACL{host})},
		{"auth then an equal digest: both kept", []vocab.ACL{acl1(vocab.PermAll, "auth", ""), u1},
			append(expanded(vocab.PermAll), u1)},
		{"an equal digest then auth: both kept", []vocab.ACL{u1, acl1(vocab.PermAll, "auth", "")},
			append([]vocab.ACL{u1}, expanded(vocab.PermAll)...)},
		{"auth twice with other perms", []vocab.ACL{acl1(vocab.PermRead, "auth", ""), wr, acl1(vocab.PermAll, "auth", ""), acl1(vocab.PermRead, "auth", "")},
			slices.Concat(expanded(vocab.PermRead), []vocab.ACL{wr}, expanded(vocab.PermAll))},
	}
	for _, tc := range tests {
		got, err := FixupACL(tc.acl, ids)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: FixupACL = %v, %v\nwant %v", tc.name, got, err, tc.want)
		}
	}
}

// orderCommands are creates and setACLs with unsorted, repeated and "auth"
// ACLs, and what getACL must show on each node afterwards (as ZooKeeper
// 3.8.0 showed it).
func orderCommands() ([]Command, map[string][]vocab.ACL) {
	zed, amy := acl1(vocab.PermAll, "digest", vocab.DigestID("zed", "z")), acl1(vocab.PermRead|vocab.PermWrite, "digest", vocab.DigestID("amy", "a"))
	wr, ww := acl1(vocab.PermRead, "world", "anyone"), acl1(vocab.PermWrite, "world", "anyone")
	net8, host := acl1(vocab.PermRead, "ip", "10.0.0.0/8"), acl1(vocab.PermRead, "ip", "1.2.3.4")
	auth := acl1(vocab.PermAll, "auth", "")
	ids := zkUsers(strings.Fields("u5 u1 u9 u3 carol alice bob"))
	var exp []vocab.ACL
	for _, u := range strings.Fields("bob u9 u3 carol u5 u1 alice") {
		exp = append(exp, acl1(vocab.PermAll, "digest", vocab.DigestID(u, "pw")))
	}
	withAuth := func(c Command) Command { c.Auth = ids; return c }
	cmds := []Command{
		mkCreate("/unsorted", nil, vocab.ModePersistent, net8, zed, wr, amy),
		// The same entries in another order are another list.
		mkCreate("/sorted", nil, vocab.ModePersistent, amy, net8, wr, zed),
		mkCreate("/unsorted2", nil, vocab.ModePersistent, net8, zed, wr, amy),
		mkCreate("/dups", nil, vocab.ModePersistent, wr, zed, wr, ww, zed, host, wr),
		withAuth(mkCreate("/auth", nil, vocab.ModePersistent, wr, auth, host)),
		withAuth(mkCreate("/authdup", nil, vocab.ModePersistent, auth, exp[5])),
		mkCreate("/set", nil, vocab.ModePersistent),
		withAuth(mkCreate("/setauth", nil, vocab.ModePersistent)),
		withAuth(apSetACL("/set", 0, zed, wr, amy, wr, zed, net8)),
		withAuth(apSetACL("/setauth", 0, amy, auth, ww, amy, auth)),
	}
	want := map[string][]vocab.ACL{
		"/unsorted":  {net8, zed, wr, amy},
		"/sorted":    {amy, net8, wr, zed},
		"/unsorted2": {net8, zed, wr, amy},
		"/dups":      {wr, zed, ww, host},
		"/auth":      slices.Concat([]vocab.ACL{wr}, exp, []vocab.ACL{host}),
		"/authdup":   append(slices.Clone(exp), exp[5]),
		"/set":       {zed, wr, amy, net8},
		"/setauth":   slices.Concat([]vocab.ACL{amy}, exp, []vocab.ACL{ww}),
	}
	return cmds, want
}

func checkACLs(t *testing.T, what string, v *View, want map[string][]vocab.ACL) {
	t.Helper()
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range want {
			if !yield(p) {
				return
			}
		}
	}) {
		got, _, err := v.GetACL(p, superAuth)
		if err != nil || !slices.Equal(got, want[p]) {
			t.Errorf("%s: getACL %s = %v, %v\nwant %v", what, p, got, err, want[p])
		}
	}
}

func TestACLOrderApplySnapshot(t *testing.T) {
	cmds, want := orderCommands()
	f := New()
	for _, c := range cmds {
		mustApply(t, f, 1, c)
	}
	v := f.View()
	checkACLs(t, "applied", v, want)

	// Interning is order-sensitive: /sorted has its own list, the two
	// unsorted nodes share one.
	a, b, s := v.s.lookup("/unsorted").acl, v.s.lookup("/unsorted2").acl, v.s.lookup("/sorted").acl
	if a != b || a == s {
		t.Errorf("interning: /unsorted %p, /unsorted2 %p, /sorted %p", a, b, s)
	}

	snap := snapshotBytes(t, v)
	g := restoreBytes(t, snap)
	checkACLs(t, "restored", g.View(), want)
	if got := snapshotBytes(t, g.View()); !bytes.Equal(got, snap) {
		t.Error("the restored state's snapshot is not byte-identical")
	}
	gv := g.View()
	if gv.s.lookup("/unsorted").acl != gv.s.lookup("/unsorted2").acl || gv.s.lookup("/unsorted").acl == gv.s.lookup("/sorted").acl {
		t.Error("restore interned the ACL lists by their entries, not their order")
	}

	// Two replicas replaying the same log agree byte for byte.
	h := New()
	for _, c := range cmds {
		mustApply(t, h, 1, c)
	}
	if h.View().Digest() != v.Digest() {
		t.Error("two FSMs applying the same commands have different digests")
	}
	// The same entries in another order give another state.
	k := New()
	for _, c := range cmds {
		if c.Op.Path == "/unsorted" {
			c.Op.ACL = slices.Clone(c.Op.ACL)
			slices.Reverse(c.Op.ACL)
		}
		mustApply(t, k, 1, c)
	}
	if k.View().Digest() == v.Digest() {
		t.Error("reordering an ACL did not change the digest")
	}
}

// An ACL record lists its entries in stored order, and restore keeps it
// (here in a hand-built format 1 stream).
func TestRestoreKeepsACLOrder(t *testing.T) {
	zed, wr := acl1(vocab.PermAll, "digest", vocab.DigestID("zed", "z")), acl1(vocab.PermRead, "world", "anyone")
	s := (&snapBuilder{}).header(1, 2, 1, 2, 0).acl(vocab.OpenACLUnsafe...).node("", 0, snapFields{}, nil, 1)
	s.acl(zed, wr).node("n", 1, snapFields{2, 2, 2}, nil, 0).end()
	g := New()
	if err := g.Restore(bytes.NewReader(snapFrame(s.b))); err != nil {
		t.Fatal(err)
	}
	if got, _, err := g.View().GetACL("/n", superAuth); err != nil || !slices.Equal(got, []vocab.ACL{zed, wr}) {
		t.Errorf("getACL /n = %v, %v", got, err)
	}
}
