package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"coord/server/sessions"
	"coord/vocab"
)

// A sign-in is one person's use of the console: a cookie naming it, a
// CSRF token every change must send back, the identities the person
// proved, and one session on this server's session layer that every read
// and write goes through, so the same ACL checks decide as for any client.
// The session is re-opened with the same identities if it ends under the
// sign-in (this server lost its leader, say); the page is told to re-read.

const cookieName = "coord_console"

type signIn struct {
	c        *Console
	key      string // the cookie's value
	csrf     string
	user     string // "" for anonymous
	password string // kept to authenticate a re-opened session
	x509     *vocab.Id
	ip       string
	admin    bool
	started  time.Time

	mu       sync.Mutex
	lastUsed time.Time
	link     *link
	ended    bool
	subs     map[chan event]struct{}
}

// event is what /ui/api/events sends: a watch that fired, or (Session set)
// a change of the sign-in's session.
type event struct {
	Type    string `json:"type,omitempty"`
	Path    string `json:"path,omitempty"`
	Zxid    string `json:"zxid,omitempty"`
	Session string `json:"-"`
}

type meJSON struct {
	User       string   `json:"user"`
	Admin      bool     `json:"admin"`
	Identities []idJSON `json:"identities"`
	CSRF       string   `json:"csrf"`
	Server     string   `json:"server"`
	Session    string   `json:"session"`
	ExpiresMs  int64    `json:"expires_ms"`
}

type idJSON struct {
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// login signs a person in: user and password (a digest identity, as
// ZooKeeper's addAuth digest), or neither (anonymous: world:anyone and the
// address's ip identity only). A verified client certificate adds its x509
// identity.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	var req struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	if err := readJSON(r, &req); err != nil {
		reply(w, nil, err)
		return
	}
	if strings.Contains(req.User, ":") {
		reply(w, nil, errorf(http.StatusBadRequest, "BadArguments", "a user name cannot contain ':'"))
		return
	}
	if req.User == "" && req.Password != "" {
		reply(w, nil, errorf(http.StatusBadRequest, "BadArguments", "a password needs a user name"))
		return
	}
	ip := remoteIP(r)
	si := &signIn{c: c, key: randomToken(), csrf: randomToken(), user: req.User, password: req.Password, ip: ip,
		started: time.Now(), lastUsed: time.Now(), subs: map[chan event]struct{}{}}
	if r.TLS != nil {
		if id, ok := c.srv.X509Identity(r.TLS); ok {
			si.x509 = &id
		}
	}
	userPassword := ""
	if req.User != "" {
		userPassword = req.User + ":" + req.Password
	}
	si.admin = c.srv.IsAdmin(userPassword, si.x509)
	if err := c.admit(si); err != nil {
		reply(w, nil, err)
		return
	}
	if _, err := si.conn(r.Context()); err != nil {
		c.forget(si)
		reply(w, nil, err)
		return
	}
	c.cfg.Log.Info("console sign-in", "user", si.who(), "admin", si.admin, "ip", ip)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: si.key, Path: "/ui/", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	reply(w, si.me(), nil)
}

// admit holds si if the bounds allow.
func (c *Console) admit(si *signIn) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errorf(http.StatusServiceUnavailable, "Unavailable", "the server is shutting down")
	}
	if len(c.signIns) >= c.cfg.MaxSignIns {
		return errorf(http.StatusServiceUnavailable, "Unavailable", fmt.Sprintf("the console holds its most sign-ins (%d); try later", c.cfg.MaxSignIns))
	}
	n := 0
	for _, o := range c.signIns {
		if o.ip == si.ip {
			n++
		}
	}
	if n >= c.cfg.MaxPerAddress {
		return errorf(http.StatusServiceUnavailable, "Unavailable", fmt.Sprintf("%s holds %d sign-ins, the most one address may; sign out of some", si.ip, n))
	}
	c.signIns[si.key] = si
	return nil
}

func (c *Console) forget(si *signIn) {
	c.mu.Lock()
	if c.signIns[si.key] == si {
		delete(c.signIns, si.key)
	}
	c.mu.Unlock()
	si.end("closed")
}

// current is the request's sign-in, or an error that sends the page to
// the sign-in form. A sign-in made with a client certificate is only
// used with that certificate.
func (c *Console) current(r *http.Request) (*signIn, error) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil, errorf(http.StatusUnauthorized, "Unauthenticated", "not signed in")
	}
	c.mu.Lock()
	si := c.signIns[ck.Value]
	c.mu.Unlock()
	if si == nil {
		return nil, errorf(http.StatusUnauthorized, "Unauthenticated", "not signed in, or the sign-in expired")
	}
	if si.x509 != nil {
		var now *vocab.Id
		if r.TLS != nil {
			if id, ok := c.srv.X509Identity(r.TLS); ok {
				now = &id
			}
		}
		if now == nil || *now != *si.x509 {
			return nil, errorf(http.StatusUnauthorized, "Unauthenticated", "this sign-in belongs to another client certificate")
		}
	}
	now := time.Now()
	si.mu.Lock()
	expired := si.ended || now.Sub(si.lastUsed) > c.cfg.Idle || now.Sub(si.started) > c.cfg.MaxAge
	if !expired {
		si.lastUsed = now
	}
	si.mu.Unlock()
	if expired {
		c.forget(si)
		return nil, errorf(http.StatusUnauthorized, "Unauthenticated", "the sign-in expired; sign in again")
	}
	return si, nil
}

// handler is a console call that answers JSON: a value, or an error
// (an *apiError for its status and code).
type handler func(si *signIn, r *http.Request) (any, error)

// api wraps a JSON call that needs a sign-in.
func (c *Console) api(h handler) http.HandlerFunc {
	return c.signedIn(func(si *signIn, w http.ResponseWriter, r *http.Request) {
		v, err := h(si, r)
		reply(w, v, err)
	})
}

// signedIn wraps a call that needs a sign-in (and, for a change, its CSRF
// token).
func (c *Console) signedIn(h func(si *signIn, w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		si, err := c.current(r)
		if err != nil {
			reply(w, nil, err)
			return
		}
		if r.Method == http.MethodPost && subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(si.csrf)) != 1 {
			reply(w, nil, errorf(http.StatusForbidden, "CSRF", "the change's "+csrfHeader+" token is not this sign-in's; reload the page"))
			return
		}
		h(si, w, r)
	}
}

// admin wraps a call that needs the admin identity the Admin service
// needs.
func (c *Console) admin(h handler) http.HandlerFunc {
	return c.api(func(si *signIn, r *http.Request) (any, error) {
		if !si.admin {
			return nil, errorf(http.StatusForbidden, "Forbidden", "this needs an admin identity: sign in as the -super-digest user, or with a client certificate listed in -admin-x509")
		}
		return h(si, r)
	})
}

func (c *Console) me(si *signIn, r *http.Request) (any, error) { return si.me(), nil }

func (c *Console) logout(si *signIn, w http.ResponseWriter, r *http.Request) {
	c.forget(si)
	c.cfg.Log.Info("console sign-out", "user", si.who(), "ip", si.ip)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	reply(w, struct{}{}, nil)
}

func (si *signIn) who() string {
	if si.user == "" {
		return "anonymous"
	}
	return si.user
}

func (si *signIn) me() meJSON {
	si.mu.Lock()
	defer si.mu.Unlock()
	m := meJSON{User: si.user, Admin: si.admin, CSRF: si.csrf, Server: si.c.srv.ID(),
		ExpiresMs: si.lastUsed.Add(si.c.cfg.Idle).UnixMilli(), Identities: []idJSON{}}
	if si.link != nil {
		m.Session = hexID(si.link.id)
		for _, id := range si.link.ids {
			m.Identities = append(m.Identities, idJSON{id.Scheme, id.ID})
		}
	}
	return m
}

// sweep ends sign-ins past their idle or whole-life bound (each link
// keeps its own session alive meanwhile).
func (c *Console) sweep() {
	defer c.wg.Done()
	t := time.NewTicker(min(time.Second, c.cfg.Idle/4))
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case now := <-t.C:
			var old []*signIn
			c.mu.Lock()
			for k, si := range c.signIns {
				si.mu.Lock()
				expired := si.ended || now.Sub(si.lastUsed) > c.cfg.Idle || now.Sub(si.started) > c.cfg.MaxAge
				si.mu.Unlock()
				if expired {
					old = append(old, si)
					delete(c.signIns, k)
				}
			}
			c.mu.Unlock()
			for _, si := range old {
				c.cfg.Log.Info("console sign-in expired", "user", si.who(), "ip", si.ip)
				si.end("expired")
			}
		}
	}
}

// conn is the sign-in's session, opened (or re-opened, telling the page)
// if it has none.
func (si *signIn) conn(ctx context.Context) (*link, error) {
	si.mu.Lock()
	defer si.mu.Unlock()
	if si.ended {
		return nil, errorf(http.StatusUnauthorized, "Unauthenticated", "the sign-in ended")
	}
	if si.link != nil && !si.link.isDone() {
		return si.link, nil
	}
	reopen := si.link != nil
	auth := []vocab.Id{}
	if si.x509 != nil {
		auth = append(auth, *si.x509)
	}
	l, err := openLink(ctx, si.c.srv, &sessions.ConnectRequest{TimeoutMs: si.c.cfg.SessionTimeoutMs, Auth: auth}, si.ip, si.fanOut)
	if err != nil {
		return nil, err
	}
	if si.user != "" {
		r, err := l.call(ctx, &sessions.Request{Kind: sessions.OpAuth, Scheme: "digest", Auth: []byte(si.user + ":" + si.password)})
		if err == nil && r.Err != vocab.OK {
			err = errorf(http.StatusUnauthorized, "Unauthenticated", "the server refused the digest identity: "+r.Err.String())
		}
		if err != nil {
			l.close(true)
			return nil, err
		}
	}
	ids, err := l.whoAmI(ctx)
	if err != nil {
		l.close(true)
		return nil, err
	}
	l.ids = ids
	si.link = l
	if reopen {
		si.fanOutLocked(event{Session: "reconnected"})
	}
	return l, nil
}

// fanOut hands a watch event to every open event stream of the sign-in.
func (si *signIn) fanOut(ev event) {
	si.mu.Lock()
	defer si.mu.Unlock()
	si.fanOutLocked(ev)
}

func (si *signIn) fanOutLocked(ev event) {
	for ch := range si.subs {
		select {
		case ch <- ev:
		default:
			// The stream is behind: tell it to re-read everything
			// rather than block the session's events.
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- event{Session: "resync"}:
			default:
			}
		}
	}
}

func (si *signIn) subscribe() (chan event, func()) {
	ch := make(chan event, 256)
	si.mu.Lock()
	si.subs[ch] = struct{}{}
	si.mu.Unlock()
	return ch, func() {
		si.mu.Lock()
		delete(si.subs, ch)
		si.mu.Unlock()
	}
}

// end closes the sign-in's session (through the log, unless the server is
// stopping) and tells its event streams why.
func (si *signIn) end(why string) {
	si.mu.Lock()
	if si.ended {
		si.mu.Unlock()
		return
	}
	si.ended = true
	l := si.link
	si.fanOutLocked(event{Session: why})
	si.mu.Unlock()
	if l != nil {
		l.close(why != "stopping")
	}
}
