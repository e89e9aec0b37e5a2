package zkfront

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"coord/fsm"
	"coord/server/sessions"
	"coord/vocab"
	"coord/zk"
)

// Server is what the front end needs of the coord server it fronts. Each
// method is called concurrently, from any connection's goroutine.
type Server interface {
	// Admit counts a new connection from nc's address against the
	// server's per-address limit (ZooKeeper's maxClientCnxns, which the
	// ZooKeeper port shares with gRPC session streams) and its limit on
	// all client connections, and returns the address as an "ip" ACL id
	// and "" or why it refuses the connection (a refused-connections
	// metric reason). Release uncounts a connection Admit let in.
	Admit(nc net.Conn) (ip, refused string)
	Release(ip string)
	// X509Identity is the identity a verified client certificate gives a
	// session (false: none), as the server's other client ports take it.
	X509Identity(cs *tls.ConnectionState) (vocab.Id, bool)
	// LeaderWait is how long a request waits for a leader to appear; a
	// connect waits four times as long.
	LeaderWait() time.Duration

	// What the four-letter words report. Serving: the server has contact
	// with a leader (else the words that need it answer "not currently
	// serving requests"); ReadOnly: it is cut off and serves read-only
	// sessions. Role is "leader", "follower", "observer" or "candidate";
	// Members the number of servers it knows (a lone leader is
	// "standalone"). Quorum is conf's quorum part and this server's number
	// in /zookeeper/config (conf shows the quorum part only outside
	// standalone mode).
	Serving() bool
	ReadOnly() bool
	Role() string
	Members() int
	View() *fsm.View
	Quorum() (serverID int64, q *zk.QuorumConf)

	// AcceptFailed counts an accept on the port that failed (it is
	// retried); Refused a connection closed by a limit, by reason:
	// "per_address_limit" or "handshake_timeout".
	AcceptFailed()
	Refused(reason string)
}

// Config is the front end's part of a server's configuration.
type Config struct {
	// Addr is the ZooKeeper port's address; with TLS it serves TLS and,
	// unless TLSOnly, plaintext. SecureAddr, if set, is a TLS-only port
	// (ZooKeeper's secureClientPort) and needs TLS.
	Addr, SecureAddr string
	TLS              *tls.Config // nil: plaintext only
	TLSOnly          bool

	// Sessions is the session layer every connection's session lives in.
	Sessions *sessions.Layer
	Logger   *slog.Logger

	// HandshakeTimeout bounds the wait for a connect request or a
	// four-letter word; MaxFrameBytes is the largest frame read.
	HandshakeTimeout time.Duration
	MaxFrameBytes    int
	// SASL: the server has SASL users (else a SASL request is refused
	// Unimplemented and its connection closed).
	SASL bool

	// FourLetterWords is the whitelist ("*": all); ReadOnlyMode adds isro.
	FourLetterWords []string
	ReadOnlyMode    bool

	// What conf, dirs and mntr report: the data directory, the session
	// settings, the per-address limit and when the server started.
	DataDir                                    string
	Tick, MinSessionTimeout, MaxSessionTimeout time.Duration
	MaxClientConns                             int
	Started                                    time.Time
}

// Frontend serves the ZooKeeper port of one server.
type Frontend struct {
	cfg   Config
	srv   Server
	sess  *sessions.Layer
	log   *slog.Logger
	stats *serverStats // what srvr, stat and mntr report (stats.go)

	lis, secureLis net.Listener
	conns          atomic.Int64 // connections open

	mu     sync.Mutex
	byConn map[*sessions.Conn]*conn // connections with a session, for the four-letter words

	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // the accept loops
}

// Start opens the ZooKeeper port (and the TLS-only one) and accepts
// connections on them until Close.
func Start(cfg Config, srv Server) (*Frontend, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	f := &Frontend{cfg: cfg, srv: srv, sess: cfg.Sessions, log: log, stats: newServerStats(),
		byConn: map[*sessions.Conn]*conn{}, closing: make(chan struct{})}
	if cfg.SecureAddr != "" && cfg.TLS == nil {
		return nil, errors.New("server: a secure ZooKeeper port needs TLS")
	}
	lis, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("server: ZooKeeper listener: %w", err)
	}
	if cfg.TLS != nil {
		lis = &unifiedListener{Listener: lis, tls: cfg.TLS, tlsOnly: cfg.TLSOnly}
	}
	f.lis = lis
	f.serve(lis)
	if cfg.SecureAddr != "" {
		slis, err := net.Listen("tcp", cfg.SecureAddr)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("server: secure ZooKeeper listener: %w", err)
		}
		f.secureLis = tls.NewListener(slis, cfg.TLS)
		f.serve(f.secureLis)
	}
	return f, nil
}

func (f *Frontend) serve(lis net.Listener) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.accept(lis)
	}()
}

// Addr is the ZooKeeper port's address.
func (f *Frontend) Addr() string { return f.lis.Addr().String() }

// SecureAddr is the TLS-only port's address ("" when off).
func (f *Frontend) SecureAddr() string {
	if f.secureLis == nil {
		return ""
	}
	return f.secureLis.Addr().String()
}

// Close closes the listeners and waits for their accept loops. The
// connections stay; they end when their sessions' connections are shut
// (the server shuts them all as it closes).
func (f *Frontend) Close() {
	f.closeOnce.Do(func() {
		close(f.closing)
		f.lis.Close()
		if f.secureLis != nil {
			f.secureLis.Close()
		}
		f.wg.Wait()
	})
}

// accept accepts ZooKeeper connections until the front end closes. An
// accept that fails (out of file descriptors, a connection aborted before
// it was accepted, ...) is retried after a short, growing pause, as Go's
// net/http server does: a burst of connections must never stop the
// listener for good.
func (f *Frontend) accept(lis net.Listener) {
	var pause time.Duration
	var lastFull time.Time
	for {
		nc, err := lis.Accept()
		if err != nil {
			select {
			case <-f.closing:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			f.log.Warn("ZooKeeper listener: accept failed; retrying", "err", err, "in", pause)
			f.srv.AcceptFailed()
			select {
			case <-f.closing:
				return
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
		ip, why := f.srv.Admit(nc)
		if why != "" {
			// ZooKeeper's maxClientCnxns, or the server's own bound on
			// all of them: the connection is closed at once, and its
			// client tries another server.
			if why == "per_address_limit" {
				f.log.Warn("too many connections from one address; closing", "ip", ip, "max", f.cfg.MaxClientConns)
			} else if now := time.Now(); now.Sub(lastFull) >= time.Second {
				lastFull = now // once a second at most: a storm refuses thousands
				f.log.Warn("as many client connections as this server may hold; closing new ones", "reason", why)
			}
			f.srv.Refused(why)
			nc.Close()
			continue
		}
		f.conns.Add(1)
		go func() {
			defer f.srv.Release(ip)
			defer f.conns.Add(-1)
			f.serveConn(nc, ip)
		}()
	}
}

// handshakeFailed counts a connection closed before its handshake because
// it sent nothing in time.
func (f *Frontend) handshakeFailed(err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		f.srv.Refused("handshake_timeout")
	}
}

// connList is the connections with a session, in session id order.
func (f *Frontend) connList() []*conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*conn, 0, len(f.byConn))
	for _, zc := range f.byConn {
		out = append(out, zc)
	}
	slices.SortFunc(out, func(a, b *conn) int { return cmpInt64(a.c.ID(), b.c.ID()) })
	return out
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
