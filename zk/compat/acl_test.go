package compat

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

// getACL/setACL with aversion, digest authentication, NoAuth on every op
// that checks a permission, and the auth scheme.
func TestACLAndDigestAuth(t *testing.T) {
	cl := newCluster(t, 1)
	alice := connect(t, "alice", cl.Addrs(), clientOpts{})
	other := connect(t, "other", cl.Addrs(), clientOpts{})
	must(t, "alice auth", alice.AddAuth("digest", []byte("alice:secret")))

	private := zk.DigestACL(zk.PermAll, "alice", "secret")
	if _, err := alice.Create("/private", []byte("p"), 0, private); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Create("/private/kid", nil, 0, private); err != nil {
		t.Fatal(err)
	}

	acl, st, err := alice.GetACL("/private")
	must(t, "getACL", err)
	if !slices.Equal(acl, private) || st.Aversion != 0 {
		t.Errorf("getACL: %v %+v, want %v aversion 0", acl, st, private)
	}

	// Without alice's identity every permission check fails; exists checks
	// none.
	_, _, err = other.Get("/private")
	wantErr(t, "get", err, zk.ErrNoAuth)
	_, _, _, err = other.GetW("/private")
	wantErr(t, "getW", err, zk.ErrNoAuth)
	_, err = other.Set("/private", nil, -1)
	wantErr(t, "set", err, zk.ErrNoAuth)
	_, _, err = other.Children("/private")
	wantErr(t, "children", err, zk.ErrNoAuth)
	_, err = other.Create("/private/x", nil, 0, zk.WorldACL(zk.PermAll))
	wantErr(t, "create child", err, zk.ErrNoAuth)
	wantErr(t, "delete child", other.Delete("/private/kid", -1), zk.ErrNoAuth)
	_, err = other.SetACL("/private", zk.WorldACL(zk.PermAll), -1)
	wantErr(t, "setACL", err, zk.ErrNoAuth)
	_, _, err = other.GetACL("/private")
	wantErr(t, "getACL without READ or ADMIN", err, zk.ErrNoAuth)
	if ok, _, err := other.Exists("/private"); !ok || err != nil {
		t.Errorf("exists: %v %v", ok, err)
	}

	// A wrong password is accepted as an identity that matches nothing.
	must(t, "auth with a wrong password", other.AddAuth("digest", []byte("alice:wrong")))
	_, _, err = other.Get("/private")
	wantErr(t, "get with the wrong password", err, zk.ErrNoAuth)
	must(t, "auth", other.AddAuth("digest", []byte("alice:secret")))
	if data, _, err := other.Get("/private"); err != nil || string(data) != "p" {
		t.Errorf("get after auth: %q %v", data, err)
	}

	// setACL bumps aversion only; versions are checked against aversion.
	before := alice.stat("/private")
	st1, err := alice.SetACL("/private", private, 0)
	must(t, "setACL", err)
	if st1.Aversion != 1 || st1.Version != before.Version || st1.Cversion != before.Cversion ||
		st1.Mzxid != before.Mzxid || st1.Pzxid != before.Pzxid || st1.Czxid != before.Czxid {
		t.Errorf("after setACL: %+v (before %+v)", st1, before)
	}
	_, err = alice.SetACL("/private", private, 0)
	wantErr(t, "setACL with a stale aversion", err, zk.ErrBadVersion)
	ro := zk.WorldACL(zk.PermRead)
	if _, err := alice.SetACL("/private", ro, 1); err != nil {
		t.Fatal(err)
	}
	if acl, st, _ := alice.GetACL("/private"); !slices.Equal(acl, ro) || st.Aversion != 2 {
		t.Errorf("getACL after setACL: %v %+v", acl, st)
	}
	// Now world may only read: no write, no create, no admin.
	_, err = alice.Set("/private", []byte("x"), -1)
	wantErr(t, "set on a read-only node", err, zk.ErrNoAuth)
	_, err = alice.Create("/private/x", nil, 0, zk.WorldACL(zk.PermAll))
	wantErr(t, "create under a read-only node", err, zk.ErrNoAuth)
	_, err = alice.SetACL("/private", zk.WorldACL(zk.PermAll), -1)
	wantErr(t, "setACL without ADMIN", err, zk.ErrNoAuth)

	// The auth scheme stands for the session's authenticated identities.
	if _, err := alice.Create("/mine", nil, 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	acl, _, err = alice.GetACL("/mine")
	must(t, "getACL /mine", err)
	if !slices.Equal(acl, zk.DigestACL(zk.PermAll, "alice", "secret")) {
		t.Errorf("auth ACL became %v, want alice's digest", acl)
	}
	fresh := connect(t, "fresh", cl.Addrs(), clientOpts{})
	_, _, err = fresh.Get("/mine")
	wantErr(t, "get /mine unauthenticated", err, zk.ErrNoAuth)

	// An unknown scheme fails authentication; ZooKeeper then drops the
	// connection, and the client comes back on the same session.
	id := fresh.SessionID()
	m := fresh.mark()
	wantErr(t, "auth with an unknown scheme", fresh.AddAuth("nosuchscheme", []byte("x")), zk.ErrAuthFailed)
	if _, ok := fresh.rec.waitForSince(m, func(e zk.Event) bool { return e.State == zk.StateHasSession }, wait); !ok {
		t.Fatalf("no reconnect after AuthFailed: %v", fresh.rec.since(m))
	}
	if fresh.SessionID() != id {
		t.Errorf("session changed after AuthFailed: %x, was %x", fresh.SessionID(), id)
	}
	if _, _, err := fresh.Exists("/mine"); err != nil {
		t.Errorf("exists after AuthFailed: %v", err)
	}
}

// Digest credentials of any shape authenticate as user:base64(sha1(whole
// credential)), the user being what precedes the first colon (ZooKeeper's
// DigestAuthenticationProvider); the auth scheme then records that id.
func TestDigestIdentities(t *testing.T) {
	cl := newCluster(t, 1)
	for i, cred := range []string{"alice:secret", "alice", "", ":", "alice:", ":pw", "a:b:c"} {
		c := connect(t, "c", cl.Addrs(), clientOpts{})
		must(t, "auth "+cred, c.AddAuth("digest", []byte(cred)))
		p := fmt.Sprintf("/n%d", i)
		if _, err := c.Create(p, nil, 0, zk.AuthACL(zk.PermAll)); err != nil {
			t.Fatalf("create with the auth scheme after auth %q: %v", cred, err)
		}
		acl, _, err := c.GetACL(p)
		must(t, "getACL", err)
		user, _, _ := strings.Cut(cred, ":")
		sum := sha1.Sum([]byte(cred))
		want := []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: user + ":" + base64.StdEncoding.EncodeToString(sum[:])}}
		if !slices.Equal(acl, want) {
			t.Errorf("auth %q: ACL %v, want %v", cred, acl, want)
		}
		c.Close()
	}
}

// getACL returns an ACL in the order ZooKeeper stored it: the client's
// order with exact repeats dropped (the first kept), never sorted, and
// "auth" expanded in place into the session's digest ids in the iteration
// order of ZooKeeper's id set (a ConcurrentHashMap: neither the order of
// addAuth nor a sorted one), with no repeats dropped after the expansion.
// The expected orders are what ZooKeeper 3.8.0 returned for a client on
// 127.0.0.1.
func TestACLOrder(t *testing.T) {
	cl := newCluster(t, 1)
	digest := func(p int32, user string, pw string) zk.ACL { return zk.DigestACL(p, user, pw)[0] }
	users := func(c *client, names string) {
		for _, u := range strings.Fields(names) {
			must(t, "auth "+u, c.AddAuth("digest", []byte(u+":pw")))
		}
	}
	expand := func(p int32, names string) []zk.ACL {
		var out []zk.ACL
		for _, u := range strings.Fields(names) {
			out = append(out, digest(p, u, "pw"))
		}
		return out
	}
	zed, amy := digest(zk.PermAll, "zed", "z"), digest(zk.PermRead|zk.PermWrite, "amy", "a")
	wr, ww := zk.WorldACL(zk.PermRead)[0], zk.WorldACL(zk.PermWrite)[0]
	net8 := zk.ACL{Perms: zk.PermRead, Scheme: "ip", ID: "10.0.0.0/8"}
	host := zk.ACL{Perms: zk.PermRead, Scheme: "ip", ID: "1.2.3.4"}
	auth := zk.AuthACL(zk.PermAll)[0]

	// plain holds zed's id, so it sees digest hashes unredacted.
	plain := connect(t, "plain", cl.Addrs(), clientOpts{})
	must(t, "auth zed", plain.AddAuth("digest", []byte("zed:z")))
	// seven added seven users; ZooKeeper's set iterates them in another order.
	seven := connect(t, "seven", cl.Addrs(), clientOpts{})
	users(seven, "u5 u1 u9 u3 carol alice bob")
	exp7 := expand(zk.PermAll, "bob u9 u3 carol u5 u1 alice")
	u1 := digest(zk.PermAll, "u1", "pw")
	// many added fourteen: the set grew twice on the way.
	many := connect(t, "many", cl.Addrs(), clientOpts{})
	users(many, "user07 user03 user12 user01 user14 user09 user05 user11 user02 user08 user13 user04 user10 user06")
	exp14 := expand(zk.PermAll,
		"user05 user12 user10 user09 user14 user08 user06 user01 user11 user13 user04 user03 user02 user07")

	check := func(c *client, path string, want []zk.ACL) {
		t.Helper()
		acl, _, err := c.GetACL(path)
		if err != nil || !slices.Equal(acl, want) {
			t.Errorf("getACL %s = %v, %v\nwant %v", path, acl, err, want)
		}
	}
	create := func(c *client, path string, acl ...zk.ACL) {
		t.Helper()
		if _, err := c.Create(path, nil, 0, acl); err != nil {
			t.Fatalf("create %s %v: %v", path, acl, err)
		}
	}
	setACL := func(c *client, path string, acl ...zk.ACL) {
		t.Helper()
		if _, err := c.SetACL(path, acl, -1); err != nil {
			t.Fatalf("setACL %s %v: %v", path, acl, err)
		}
	}

	create(plain, "/unsorted", net8, zed, wr, amy)
	check(plain, "/unsorted", []zk.ACL{net8, zed, wr, amy})
	create(plain, "/sorted", amy, net8, wr, zed)
	check(plain, "/sorted", []zk.ACL{amy, net8, wr, zed})
	create(plain, "/dups", wr, zed, wr, ww, zed, host, wr)
	check(plain, "/dups", []zk.ACL{wr, zed, ww, host})

	create(seven, "/auth", wr, auth, host)
	check(seven, "/auth", slices.Concat([]zk.ACL{wr}, exp7, []zk.ACL{host}))
	create(seven, "/authdup", auth, u1)
	check(seven, "/authdup", append(slices.Clone(exp7), u1))
	create(seven, "/dupauth", u1, auth)
	check(seven, "/dupauth", append([]zk.ACL{u1}, exp7...))
	create(seven, "/auth2", zk.AuthACL(zk.PermRead)[0], wr, auth, zk.AuthACL(zk.PermRead)[0])
	check(seven, "/auth2", slices.Concat(expand(zk.PermRead, "bob u9 u3 carol u5 u1 alice"), []zk.ACL{wr}, exp7))
	create(many, "/many", auth)
	check(many, "/many", exp14)

	create(plain, "/set", zk.WorldACL(zk.PermAll)...)
	setACL(plain, "/set", zed, wr, amy, wr, zed, net8)
	check(plain, "/set", []zk.ACL{zed, wr, amy, net8})
	create(seven, "/setauth", zk.WorldACL(zk.PermAll)...)
	setACL(seven, "/setauth", amy, auth, ww, amy, auth)
	check(seven, "/setauth", slices.Concat([]zk.ACL{amy}, exp7, []zk.ACL{ww}))
	create(many, "/setmany", zk.WorldACL(zk.PermAll)...)
	setACL(many, "/setmany", wr, auth)
	check(many, "/setmany", append([]zk.ACL{wr}, exp14...))
}
