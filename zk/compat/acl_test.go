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
