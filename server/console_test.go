package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"coord/api"
	"coord/vocab"
)

// consoleClient is a browser's side of the console's API: its cookies and
// the sign-in's CSRF token.
type consoleClient struct {
	t    *testing.T
	base string
	http *http.Client
	csrf string
}

func newConsoleClient(t *testing.T, srv *Server) *consoleClient {
	jar, _ := cookiejar.New(nil)
	return &consoleClient{t: t, base: "http://" + srv.HTTPAddr() + "/ui/api/", http: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// call sends one call and decodes a 2xx answer into out; it returns the
// status and the body.
func (c *consoleClient) call(method, path, body string, out any) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if method == "POST" {
		req.Header.Set("X-Coord-CSRF", c.csrf)
		if path == "login" {
			req.Header.Set("X-Coord-CSRF", "login")
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 == 2 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

func (c *consoleClient) must(method, path, body string, out any) {
	c.t.Helper()
	if st, b := c.call(method, path, body, out); st/100 != 2 {
		c.t.Fatalf("%s %s %s: %d %s", method, path, body, st, b)
	}
}

func (c *consoleClient) signIn(user, password string) (session string) {
	c.t.Helper()
	var me struct {
		CSRF    string `json:"csrf"`
		Session string `json:"session"`
	}
	c.must("POST", "login", fmt.Sprintf(`{"user":%q,"password":%q}`, user, password), &me)
	c.csrf = me.CSRF
	return me.Session
}

// events opens the sign-in's event stream; each line of data (or
// "session:" and the state) comes on the channel.
func (c *consoleClient) events(ctx context.Context) <-chan string {
	c.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"events", nil)
	cl := *c.http
	cl.Timeout = 0
	resp, err := cl.Do(req)
	if err != nil || resp.StatusCode != 200 {
		c.t.Fatalf("events: %v %v", resp, err)
	}
	ch := make(chan string, 100)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		kind := ""
		for sc.Scan() {
			l := sc.Text()
			switch {
			case strings.HasPrefix(l, "event: "):
				kind = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: "):
				if kind != "" {
					ch <- kind + ": " + strings.TrimPrefix(l, "data: ")
				} else {
					ch <- strings.TrimPrefix(l, "data: ")
				}
				kind = ""
			}
		}
	}()
	return ch
}

func nextEvent(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the event stream ended before %q", want)
			}
			if strings.Contains(ev, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no event %q in 10 s", want)
		}
	}
}

// The console's session is a session like any other: a watch it leaves
// fires to the page, an ephemeral it creates goes when the person signs
// out, and a session that ends under a sign-in (here: killed by an admin)
// is opened again at the next call, the page told to re-read.
func TestConsoleEventsEphemeralsAndReopen(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	srv := c.Servers[1]
	other := newSession(t, c.Servers[2].GRPCAddr())
	mustOK(t, other.create("/w", "one", vocab.ModePersistent))

	b := newConsoleClient(t, srv)
	first := b.signIn("alice", "pw")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := b.events(ctx)
	var node struct {
		Data []byte `json:"data"`
	}
	b.must("GET", "node?path=/w&watch=1", "", &node)
	if string(node.Data) != "one" {
		t.Fatalf("/w reads %q", node.Data)
	}
	mustOK(t, other.set("/w", "two"))
	nextEvent(t, evs, `"type":"changed","path":"/w"`)
	b.must("GET", "children?path=/&watch=1", "", nil)
	mustOK(t, other.create("/w2", "", vocab.ModePersistent))
	nextEvent(t, evs, `"type":"children","path":"/"`)

	var made struct {
		Path string `json:"path"`
	}
	b.must("POST", "create", `{"path":"/eph","mode":"ephemeral_sequential"}`, &made)
	if r := other.get(made.Path, false); vocab.Code(r.Err) != vocab.OK {
		t.Fatalf("the console's ephemeral %s: %v", made.Path, r)
	}

	// An admin closes the console's session: the next call opens another
	// (with the same identities), and the page hears of it.
	admin := newConsoleClient(t, srv)
	admin.signIn("bob", "pw")
	if st, _ := admin.call("POST", "sessions/close", fmt.Sprintf(`{"id":%q}`, first), nil); st != http.StatusForbidden {
		t.Fatalf("a non-admin closed a session: %d", st)
	}
	adm := &adminService{s: srv, peer: true}
	var id int64
	fmt.Sscanf(first, "0x%x", &id)
	if _, err := adm.KillSession(context.Background(), &api.KillSessionRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, evs, `session: {"state":"lost"}`)
	if r := other.get(made.Path, false); vocab.Code(r.Err) != vocab.NoNode {
		t.Fatalf("the ephemeral of the killed console session is still there: %v", r)
	}
	var me struct {
		Session    string `json:"session"`
		Identities []struct{ Scheme, ID string }
	}
	b.must("GET", "node?path=/w", "", nil)
	nextEvent(t, evs, `session: {"state":"reconnected"}`)
	b.must("GET", "me", "", &me)
	if me.Session == first || me.Session == "" {
		t.Fatalf("after its session was killed the sign-in holds session %q (was %q)", me.Session, first)
	}
	digest := false
	for _, id := range me.Identities {
		digest = digest || id.Scheme == "digest" && id.ID == "alice"
	}
	if !digest {
		t.Fatalf("the reopened session's identities: %+v", me.Identities)
	}

	// Sign-out closes the session through the log: its ephemeral goes at
	// once, not at expiry.
	b.must("POST", "create", `{"path":"/eph2","mode":"ephemeral"}`, nil)
	b.must("POST", "logout", "", nil)
	if r := other.sync(); vocab.Code(r.Err) != vocab.OK {
		t.Fatal(r)
	}
	if r := other.get("/eph2", false); vocab.Code(r.Err) != vocab.NoNode {
		t.Fatalf("the ephemeral of a signed-out console session is still there: %v", r)
	}
	if st, _ := b.call("GET", "node?path=/w", "", nil); st != http.StatusUnauthorized {
		t.Fatalf("after sign-out: %d, want 401", st)
	}
}

// A sign-in that makes no call for ConsoleIdle ends: its calls answer 401
// and its session is closed.
func TestConsoleSignInExpires(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 1, 0, func(cfg *Config) { cfg.ConsoleIdle = 300 * time.Millisecond })
	srv := c.Servers[0]
	b := newConsoleClient(t, srv)
	b.signIn("", "")
	b.must("POST", "create", `{"path":"/e","mode":"ephemeral"}`, nil)
	other := newSession(t, srv.GRPCAddr())
	deadline := time.Now().Add(20 * time.Second)
	for vocab.Code(other.get("/e", false).Err) != vocab.NoNode {
		if time.Now().After(deadline) {
			t.Fatal("the idle sign-in's ephemeral is still there after 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, body := b.call("GET", "me", "", nil); st != http.StatusUnauthorized || !strings.Contains(body, "sign") {
		t.Fatalf("an idle sign-in answers %d %s", st, body)
	}
}

// A server restarted (its sign-ins were in its memory) answers the old
// cookie 401, and a new sign-in works at once.
func TestConsoleAfterRestart(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	b := newConsoleClient(t, c.Servers[1])
	b.signIn("alice", "pw")
	b.must("POST", "create", `{"path":"/r","data":"YQ=="}`, nil)
	srv := c.Restart(1)
	b.base = "http://" + srv.HTTPAddr() + "/ui/api/"
	// A restarted server gets a new HTTP port in tests (":0"): the
	// cookie, scoped to host and path, goes along in this jar anyway.
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, _ := b.call("GET", "node?path=/r", "", nil)
		if st == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted server answers an old sign-in %d", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		st, body := b.call("POST", "login", `{"user":"alice","password":"pw"}`, nil)
		if st == 200 {
			var me struct{ CSRF string }
			json.Unmarshal([]byte(body), &me)
			b.csrf = me.CSRF
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sign-in on the restarted server: %d %s", st, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var node struct {
		Data []byte `json:"data"`
	}
	b.must("GET", "node?path=/r", "", &node)
	if string(node.Data) != "a" {
		t.Fatalf("/r reads %q after the restart", node.Data)
	}
}

// With TLS on the HTTP port the console works over HTTPS, its cookie is
// Secure, a verified client certificate's identity joins the sign-in (and
// one listed in -admin-x509 makes it an admin), and the sign-in is not
// usable from a connection without that certificate.
func TestConsoleTLSAndClientCertificate(t *testing.T) {
	t.Parallel()
	pki := NewTestPKI(t)
	subject := "CN=coord test client"
	c := NewTestClusterWith(t, 1, 0, func(cfg *Config) { pki.UseIn(cfg); cfg.AdminX509 = []string{subject} })
	srv := c.Servers[0]
	withCert := newConsoleClient(t, srv)
	withCert.base = "https://" + srv.HTTPAddr() + "/ui/api/"
	withCert.http.Transport = &http.Transport{TLSClientConfig: pki.ClientTLS(true)}
	resp, err := withCert.http.Post(withCert.base+"login", "application/json", strings.NewReader(`{"user":"","password":""}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a sign-in without the CSRF header: %s", resp.Status)
	}
	withCert.signIn("", "")
	var me struct {
		Admin      bool
		Identities []struct{ Scheme, ID string }
	}
	withCert.must("GET", "me", "", &me)
	x509 := false
	for _, id := range me.Identities {
		x509 = x509 || id.Scheme == "x509" && id.ID == subject
	}
	if !x509 || !me.Admin {
		t.Fatalf("a sign-in with the client certificate %s: admin %v, identities %+v", subject, me.Admin, me.Identities)
	}
	u, _ := url.Parse(withCert.base)
	cookies := withCert.http.Jar.Cookies(u)
	if len(cookies) != 1 {
		t.Fatalf("cookies: %v", cookies)
	}
	withCert.must("GET", "sessions", "", nil)

	// The same cookie on a connection without the certificate: refused.
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientTLS(false)}, Timeout: 10 * time.Second}
	req, _ := http.NewRequest("GET", withCert.base+"sessions", nil)
	req.AddCookie(cookies[0])
	resp, err = noCert.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "certificate") {
		t.Fatalf("the certificate's sign-in used without it: %s %s", resp.Status, b)
	}
	// And the cookie is marked Secure: check the Set-Cookie of a fresh
	// sign-in.
	req, _ = http.NewRequest("POST", withCert.base+"login", strings.NewReader(`{"user":"","password":""}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Coord-CSRF", "login")
	resp, err = noCert.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sc := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"Secure", "HttpOnly", "SameSite=Strict", "Path=/ui/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie over TLS %q lacks %s", sc, want)
		}
	}
}

// The admin's membership actions from a follower's console: move
// leadership, promote an observer, remove it; close another client's
// session. A non-admin is refused each.
func TestConsoleAdminActions(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 3, 1, withAdmin)
	leader := c.Leader()
	follower := c.Servers[(leader+1)%3]
	adm := newConsoleClient(t, follower)
	adm.signIn(testAdminUser, testAdminPassword)
	user := newConsoleClient(t, follower)
	user.signIn("alice", "pw")
	for _, call := range []string{"cluster/transfer", "cluster/promote", "cluster/remove", "sessions/close"} {
		if st, _ := user.call("POST", call, `{"id":"s4"}`, nil); st != http.StatusForbidden {
			t.Errorf("a non-admin's %s: %d, want 403", call, st)
		}
	}
	var cl struct {
		Leader  string
		Members []struct {
			ID, Role, State string
		}
	}
	adm.must("GET", "cluster", "", &cl)
	if cl.Leader != c.Servers[leader].ID() || len(cl.Members) != 4 {
		t.Fatalf("the cluster view: %+v", cl)
	}
	var moved struct{ Leader string }
	adm.must("POST", "cluster/transfer", `{"id":""}`, &moved)
	if moved.Leader == "" || moved.Leader == c.Servers[leader].ID() {
		t.Fatalf("transfer answered leader %q (was %s)", moved.Leader, c.Servers[leader].ID())
	}
	adm.must("POST", "cluster/promote", `{"id":"s4"}`, nil)
	c.WaitMembers(4, 0)
	adm.must("POST", "cluster/remove", `{"id":"s4"}`, nil)
	if !c.WaitFor(10*time.Second, func() bool {
		v, n := c.Members()
		return v == 3 && n == 0
	}) {
		t.Fatal("s4 still a member after remove")
	}

	other := newSession(t, c.Servers[2].GRPCAddr())
	mustOK(t, other.create("/mine", "", vocab.ModeEphemeral))
	var list struct {
		Sessions []struct {
			ID      string
			Watches *int64
		}
	}
	adm.must("GET", "sessions", "", &list)
	if len(list.Sessions) < 3 {
		t.Fatalf("sessions: %+v", list)
	}
	id := fmt.Sprintf("0x%x", uint64(other.id))
	adm.must("POST", "sessions/close", fmt.Sprintf(`{"id":%q}`, id), nil)
	r := newSession(t, c.Servers[0].GRPCAddr())
	mustOK(t, r.sync())
	if g := r.get("/mine", false); vocab.Code(g.Err) != vocab.NoNode {
		t.Fatalf("the closed session's ephemeral: %v", g)
	}
}

// Copy and move a subtree (one multi each), export it in coordctl's format
// and import it elsewhere: the copies hold the same nodes (the export
// digests agree), a move leaves no source, and a subtree holding another
// session's ephemeral is copied without it but not moved.
func TestConsoleCopyMoveExportImport(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 1, 0)
	srv := c.Servers[0]
	b := newConsoleClient(t, srv)
	b.signIn("alice", "pw")
	for _, n := range []string{
		`{"path":"/src","data":"cm9vdA=="}`,
		`{"path":"/src/a","data":"YQ==","acl":[{"scheme":"world","id":"anyone","perms":"r"},{"scheme":"auth","id":"","perms":"cdrwa"}]}`,
		`{"path":"/src/a/deep","data":null}`,
		`{"path":"/src/box","mode":"container"}`,
		`{"path":"/src/box/item","data":"aXRlbQ=="}`,
	} {
		b.must("POST", "create", n, nil)
	}
	export := func(p string) vocab.ExportFile {
		t.Helper()
		var f vocab.ExportFile
		b.must("GET", "export?path="+p, "", &f)
		if f.Format != vocab.ExportFormat || f.Digest != vocab.ExportDigest(f.Nodes) {
			t.Fatalf("export of %s: format %q, digest %s (nodes give %s)", p, f.Format, f.Digest, vocab.ExportDigest(f.Nodes))
		}
		return f
	}
	src := export("/src")
	if len(src.Nodes) != 5 {
		t.Fatalf("export of /src: %d nodes, want 5: %+v", len(src.Nodes), src.Nodes)
	}
	var copied struct{ Copied int }
	b.must("POST", "copy", `{"from":"/src","to":"/dst"}`, &copied)
	if copied.Copied != 5 || export("/dst").Digest != src.Digest {
		t.Fatalf("copy: %d nodes, digest %s, want 5 and %s", copied.Copied, export("/dst").Digest, src.Digest)
	}
	b.must("POST", "copy", `{"from":"/dst","to":"/moved","move":true}`, nil)
	if st, _ := b.call("GET", "node?path=/dst", "", nil); st != http.StatusNotFound {
		t.Fatalf("after the move /dst answers %d", st)
	}
	if export("/moved").Digest != src.Digest {
		t.Fatal("the moved subtree differs from the source")
	}
	body, _ := json.Marshal(src)
	var imported struct{ Created int }
	b.must("POST", "create", `{"path":"/imp"}`, nil)
	b.must("POST", "import?to=/imp/src", string(body), &imported)
	if imported.Created != 5 || export("/imp/src").Digest != src.Digest {
		t.Fatalf("import: %d created, digest %s, want 5 and %s", imported.Created, export("/imp/src").Digest, src.Digest)
	}
	// Into itself, onto an existing node, a tampered file: refused.
	if st, _ := b.call("POST", "copy", `{"from":"/src","to":"/src/a/x"}`, nil); st != http.StatusBadRequest {
		t.Errorf("copy into itself: %d", st)
	}
	if st, body := b.call("POST", "copy", `{"from":"/src","to":"/moved"}`, nil); st != http.StatusConflict || !strings.Contains(body, "NodeExists") {
		t.Errorf("copy onto an existing node: %d %s", st, body)
	}
	src.Nodes[1].Data = []byte("tampered")
	body, _ = json.Marshal(src)
	if st, _ := b.call("POST", "import?to=/imp/again", string(body), nil); st != http.StatusBadRequest {
		t.Errorf("import of a tampered file: %d", st)
	}
	// Another session's ephemeral: copied without, not moved.
	other := newSession(t, srv.GRPCAddr())
	mustOK(t, other.create("/src/box/eph", "", vocab.ModeEphemeral))
	b.must("POST", "copy", `{"from":"/src","to":"/dst2"}`, &copied)
	if copied.Copied != 5 || export("/dst2").Digest != export("/src").Digest {
		t.Errorf("copy of a subtree with an ephemeral: %d copied", copied.Copied)
	}
	if st, body := b.call("POST", "copy", `{"from":"/src","to":"/dst3","move":true}`, nil); st != http.StatusConflict || !strings.Contains(body, "ephemeral") {
		t.Errorf("move of a subtree with an ephemeral: %d %s", st, body)
	}
	if r := other.get("/src/a", false); vocab.Code(r.Err) != vocab.OK {
		t.Errorf("the refused move touched the source: %v", r)
	}
}

// A sign-in's session lives as long as the sign-in, whatever timeout the
// server negotiated: here 20 ticks (2 s) for the 30 s the console asks;
// 5 s without a call keep the same session and its watches.
func TestConsoleSessionOutlivesShortTimeout(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 3, 0, func(cfg *Config) { cfg.MaxSessionTimeout = 2 * time.Second })
	srv := c.Servers[(c.Leader()+1)%3]
	b := newConsoleClient(t, srv)
	first := b.signIn("", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := b.events(ctx)
	b.must("POST", "create", `{"path":"/hb"}`, nil)
	b.must("GET", "node?path=/hb&watch=1", "", nil)
	time.Sleep(5 * time.Second)
	other := newSession(t, c.Servers[0].GRPCAddr())
	mustOK(t, other.set("/hb", "x"))
	nextEvent(t, evs, `"type":"changed","path":"/hb"`)
	var me struct{ Session string }
	b.must("GET", "me", "", &me)
	if me.Session != first {
		t.Fatalf("after 5 s without a call the sign-in holds session %s, not %s: its session expired", me.Session, first)
	}
}
