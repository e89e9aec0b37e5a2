package console

import (
	"context"
	"crypto/tls"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"coord/server/sessions"
	"coord/vocab"
)

//go:embed ui
var uiFiles embed.FS

// Server is what the console needs of the server it runs in. Package server
// implements it with a small adapter; this package never imports package
// server.
type Server interface {
	// ID is this server's id.
	ID() string
	// Connect opens a session on this server's session layer, as a front
	// end does; ip is the caller's address (its "ip" identity).
	Connect(ctx context.Context, req *sessions.ConnectRequest, ip string) (*sessions.Conn, *sessions.ConnectReply, error)
	// Touch counts a heartbeat of a session connected here.
	Touch(id int64)
	// X509Identity is the identity a verified client certificate gives a
	// session (false: none), as the server's client ports take it.
	X509Identity(cs *tls.ConnectionState) (vocab.Id, bool)
	// IsAdmin tells whether the person is an admin identity as the Admin
	// service decides it: userPassword is the superuser's "user:password"
	// (checked against -super-digest), or x509 (non-nil) is listed in
	// -admin-x509.
	IsAdmin(userPassword string, x509 *vocab.Id) bool

	// The cluster as status-level reads (open, as the Admin service's
	// Status and Members and /metrics are).
	Cluster(ctx context.Context) (*Cluster, error)

	// The admin actions; who names the signed-in admin for the audit log.
	Sessions(ctx context.Context) ([]SessionRow, error)
	CloseSession(ctx context.Context, who string, id int64) error
	TransferLeadership(ctx context.Context, who, id string) (string, error)
	Promote(ctx context.Context, who, id string) error
	Remove(ctx context.Context, who, id string) error
}

// Config is the console's part of a server's configuration.
type Config struct {
	// Idle ends a sign-in that made no call for this long; MaxAge ends
	// any sign-in this long after it began.
	Idle, MaxAge time.Duration
	// SessionTimeoutMs is the timeout the console's sessions ask for
	// (negotiated like any client's).
	SessionTimeoutMs int32
	// MaxSignIns bounds the sign-ins held at once, MaxPerAddress those of
	// one address.
	MaxSignIns, MaxPerAddress int
	// MaxRequestBytes bounds a request body (an import, a node's data).
	MaxRequestBytes int64
	Log             *slog.Logger
}

// DefaultConfig is the console's configuration unless a server sets its own.
func DefaultConfig() Config {
	return Config{Idle: 30 * time.Minute, MaxAge: 12 * time.Hour, SessionTimeoutMs: 30000,
		MaxSignIns: 1000, MaxPerAddress: 64, MaxRequestBytes: 8 << 20, Log: slog.Default()}
}

// Console serves /ui/: the page and its JSON API.
type Console struct {
	cfg Config
	srv Server
	mux *http.ServeMux

	mu      sync.Mutex
	signIns map[string]*signIn // by cookie value
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

// New returns a console for srv; Handler serves it, Close ends every
// sign-in (closing their sessions).
func New(cfg Config, srv Server) *Console {
	d := DefaultConfig()
	if cfg.Idle <= 0 {
		cfg.Idle = d.Idle
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = d.MaxAge
	}
	if cfg.SessionTimeoutMs <= 0 {
		cfg.SessionTimeoutMs = d.SessionTimeoutMs
	}
	if cfg.MaxSignIns <= 0 {
		cfg.MaxSignIns = d.MaxSignIns
	}
	if cfg.MaxPerAddress <= 0 {
		cfg.MaxPerAddress = d.MaxPerAddress
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = d.MaxRequestBytes
	}
	if cfg.Log == nil {
		cfg.Log = d.Log
	}
	c := &Console{cfg: cfg, srv: srv, signIns: map[string]*signIn{}, stop: make(chan struct{})}
	c.routes()
	c.wg.Add(1)
	go c.sweep()
	return c
}

// Handler serves everything under /ui/.
func (c *Console) Handler() http.Handler { return c.mux }

// Close ends every sign-in and stops the console's loops.
func (c *Console) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	all := make([]*signIn, 0, len(c.signIns))
	for k, si := range c.signIns {
		all = append(all, si)
		delete(c.signIns, k)
	}
	c.mu.Unlock()
	close(c.stop)
	for _, si := range all {
		si.end("stopping")
	}
	c.wg.Wait()
}

func (c *Console) routes() {
	c.mux = http.NewServeMux()
	static, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(static))
	c.mux.Handle("GET /ui/", headers(files, false))
	c.mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))

	c.post("/ui/api/login", c.login, false)
	c.get("/ui/api/me", c.api(c.me))
	c.post("/ui/api/logout", c.signedIn(c.logout), true)

	c.get("/ui/api/children", c.api(c.children))
	c.get("/ui/api/node", c.api(c.node))
	c.get("/ui/api/count", c.api(c.count))
	c.get("/ui/api/search", c.api(c.search))
	c.get("/ui/api/export", c.signedIn(c.export))
	c.get("/ui/api/events", c.signedIn(c.events))
	c.post("/ui/api/create", c.api(c.create), true)
	c.post("/ui/api/set", c.api(c.set), true)
	c.post("/ui/api/setacl", c.api(c.setACL), true)
	c.post("/ui/api/delete", c.api(c.delete), true)
	c.post("/ui/api/copy", c.api(c.copy), true)
	c.post("/ui/api/import", c.api(c.importTree), true)

	c.get("/ui/api/cluster", c.api(c.cluster))
	c.post("/ui/api/cluster/transfer", c.admin(c.transfer), true)
	c.post("/ui/api/cluster/promote", c.admin(c.promote), true)
	c.post("/ui/api/cluster/remove", c.admin(c.remove), true)
	c.get("/ui/api/sessions", c.admin(c.sessions))
	c.post("/ui/api/sessions/close", c.admin(c.closeSession), true)
	unknown := headers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "NotFound", "no such console call: "+r.Method+" "+r.URL.Path)
	}), true)
	c.mux.Handle("GET /ui/api/", unknown)
	c.mux.Handle("POST /ui/api/", unknown)
}

func (c *Console) get(path string, h http.HandlerFunc) {
	c.mux.Handle("GET "+path, headers(h, true))
}

// post routes a change. Every change must carry the X-Coord-CSRF header
// (a cross-site form cannot set it, and a cross-site fetch that sets it is
// refused by the browser's preflight, which this server never allows) and
// a JSON body; signedIn changes must also send the sign-in's own token,
// which checkCSRF compares.
func (c *Console) post(path string, h http.HandlerFunc, signedIn bool) {
	c.mux.Handle("POST "+path, headers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(csrfHeader) == "" {
			fail(w, http.StatusForbidden, "CSRF", "a change needs the "+csrfHeader+" header the console page sends")
			return
		}
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
			fail(w, http.StatusForbidden, "CSRF", "a change must come from the console's own page (Sec-Fetch-Site: "+site+")")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
			fail(w, http.StatusForbidden, "CSRF", "a change must come from the console's own page (Origin "+o+")")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, c.cfg.MaxRequestBytes)
		h(w, r)
	}), true))
}

const csrfHeader = "X-Coord-CSRF"

// sameOrigin tells whether origin (scheme://host[:port]) is the origin r
// was sent to.
func sameOrigin(origin string, r *http.Request) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return strings.EqualFold(origin, scheme+"://"+r.Host)
}

// headers sets what every console response carries: a content security
// policy that allows only the console's own files (no inline script, no
// framing), and for API answers no caching.
func headers(h http.Handler, api bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		if api {
			hd.Set("Cache-Control", "no-store")
		} else {
			hd.Set("Cache-Control", "no-cache")
		}
		h.ServeHTTP(w, r)
	})
}

// apiError is an answer other than success: an HTTP status and a code the
// page shows.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, code, msg string) *apiError {
	return &apiError{status: status, code: code, msg: msg}
}

// codeError is a ZooKeeper result code as an answer.
func codeError(code vocab.Code, path string) *apiError {
	status := http.StatusInternalServerError
	switch code {
	case vocab.NoNode:
		status = http.StatusNotFound
	case vocab.NoAuth:
		status = http.StatusForbidden
	case vocab.BadVersion, vocab.NodeExists, vocab.NotEmpty, vocab.NoChildrenForEphemerals:
		status = http.StatusConflict
	case vocab.BadArguments, vocab.InvalidACL, vocab.Unimplemented:
		status = http.StatusBadRequest
	case vocab.ConnectionLoss, vocab.SessionExpired, vocab.OperationTimeout, vocab.SessionMoved, vocab.NotReadOnly, vocab.Throttled:
		status = http.StatusServiceUnavailable
	case vocab.QuotaExceeded:
		status = http.StatusConflict
	}
	msg := code.String()
	if path != "" {
		msg += ": " + path
	}
	return &apiError{status: status, code: codeName(code), msg: msg}
}

// codeName is ZooKeeper's name of a result code (KeeperException.Code).
func codeName(c vocab.Code) string {
	switch c {
	case vocab.NoNode:
		return "NoNode"
	case vocab.NoAuth:
		return "NoAuth"
	case vocab.BadVersion:
		return "BadVersion"
	case vocab.NodeExists:
		return "NodeExists"
	case vocab.NotEmpty:
		return "NotEmpty"
	case vocab.BadArguments:
		return "BadArguments"
	case vocab.InvalidACL:
		return "InvalidACL"
	case vocab.NoChildrenForEphemerals:
		return "NoChildrenForEphemerals"
	case vocab.ConnectionLoss:
		return "ConnectionLoss"
	case vocab.SessionExpired:
		return "SessionExpired"
	case vocab.QuotaExceeded:
		return "QuotaExceeded"
	case vocab.Unimplemented:
		return "Unimplemented"
	}
	return "Error"
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"code": code, "error": msg})
}

func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = errorf(http.StatusInternalServerError, "Error", err.Error())
		}
		fail(w, ae.status, ae.code, ae.msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// readJSON decodes a change's body into v.
func readJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return errorf(http.StatusUnsupportedMediaType, "BadArguments", "a change's body must be JSON (Content-Type: application/json)")
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return errorf(http.StatusRequestEntityTooLarge, "TooLarge", "the request is larger than the console takes")
		}
		return errorf(http.StatusBadRequest, "BadArguments", "the request's JSON: "+err.Error())
	}
	return nil
}
