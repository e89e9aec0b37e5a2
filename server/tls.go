package server

import (
	"bufio"
	"coord/vocab"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// TLS for every client and admin port from one set of PEM files
// (Config.TLSCert, TLSKey, TLSCA): the ZooKeeper port (TLS and plaintext on
// one port, told apart by the first byte, as ZooKeeper's port unification;
// plaintext refused with TLSOnly) and an optional TLS-only ZooKeeper port
// (SecureZKAddr, as ZooKeeper's secureClientPort), gRPC (sessions and
// admin) and HTTP. The peer plane has a trust of its own (peerauth.go). The
// files are read again when they change on disk, at most once per
// tlsReloadEvery, so a rotated certificate serves new connections without a
// restart.

// tlsReloadEvery bounds how often the files' modification times are checked.
const tlsReloadEvery = time.Second

// tlsFiles serves the certificate, key and CA from disk, reloading them
// when they change.
type tlsFiles struct {
	certFile, keyFile, caFile string
	clientAuth                bool // servers ask clients for a certificate signed by the CA

	mu      sync.Mutex
	checked time.Time
	stamp   [3]time.Time // modification times of cert, key, CA as loaded
	cert    *tls.Certificate
	pool    *x509.CertPool
}

// newTLSFiles loads the files once, so a missing or mismatched file is an
// error at start rather than at the first handshake.
func newTLSFiles(certFile, keyFile, caFile string, clientAuth bool) (*tlsFiles, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("server: TLS needs both -tls-cert and -tls-key")
	}
	if clientAuth && caFile == "" {
		return nil, errors.New("server: -tls-client-auth needs -tls-ca to verify client certificates")
	}
	f := &tlsFiles{certFile: certFile, keyFile: keyFile, caFile: caFile, clientAuth: clientAuth}
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

func modTime(path string) time.Time {
	if path == "" {
		return time.Time{}
	}
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// load reads the files; f.mu is held or f is not shared yet.
func (f *tlsFiles) load() error {
	stamp := [3]time.Time{modTime(f.certFile), modTime(f.keyFile), modTime(f.caFile)}
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("server: TLS certificate %s and key %s: %w", f.certFile, f.keyFile, err)
	}
	var pool *x509.CertPool
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return fmt.Errorf("server: TLS CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("server: TLS CA %s holds no PEM certificate", f.caFile)
		}
	}
	f.cert, f.pool, f.stamp = &cert, pool, stamp
	return nil
}

// current returns the loaded certificate and CA pool, reloading them first
// if a file changed since they were loaded (a reload that fails keeps the
// old ones: a half-written file must not take the server down).
func (f *tlsFiles) current() (*tls.Certificate, *x509.CertPool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); now.Sub(f.checked) >= tlsReloadEvery {
		f.checked = now
		if [3]time.Time{modTime(f.certFile), modTime(f.keyFile), modTime(f.caFile)} != f.stamp {
			f.load() //nolint:errcheck // keeps the previous files on error
		}
	}
	return f.cert, f.pool
}

// serverConfig is the TLS configuration of every listener.
func (f *tlsFiles) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := f.current()
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, ClientCAs: pool}
			if f.clientAuth {
				c.ClientAuth = tls.RequireAndVerifyClientCert
			} else if pool != nil {
				c.ClientAuth = tls.VerifyClientCertIfGiven
			}
			return c, nil
		},
	}
}

// unifiedListener serves TLS and, unless tlsOnly, plaintext on one port: a
// connection whose first byte is a TLS handshake record (0x16) is TLS.
// Telling them apart waits for the client's first byte, which the accept
// loop's handshake timeout bounds.
type unifiedListener struct {
	net.Listener
	tls     *tls.Config
	tlsOnly bool
}

func (l *unifiedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, l: l}, nil
}

// sniffConn decides between TLS and plaintext at its first Read.
type sniffConn struct {
	net.Conn
	l    *unifiedListener
	once sync.Once
	r    net.Conn // the connection to read and write through once decided
	err  error
}

func (c *sniffConn) decide() {
	br := bufio.NewReader(c.Conn)
	first, err := br.Peek(1)
	if err != nil {
		c.err = err
		return
	}
	buffered := &bufferedConn{Conn: c.Conn, r: br}
	if first[0] == 0x16 {
		c.r = tls.Server(buffered, c.l.tls)
		return
	}
	if c.l.tlsOnly {
		c.err = errPlaintextRefused
		c.Conn.Close()
		return
	}
	c.r = buffered
}

var errPlaintextRefused = errors.New("server: plaintext connection refused (TLS only)")

func (c *sniffConn) Read(p []byte) (int, error) {
	c.once.Do(c.decide)
	if c.err != nil {
		return 0, c.err
	}
	return c.r.Read(p)
}

func (c *sniffConn) Write(p []byte) (int, error) {
	c.once.Do(c.decide)
	if c.err != nil {
		return 0, c.err
	}
	return c.r.Write(p)
}

// Close closes the TCP connection (a TLS close_notify is not sent).
func (c *sniffConn) Close() error { return c.Conn.Close() }

// bufferedConn reads through a bufio.Reader that may hold peeked bytes.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// x509Identity is the x509 id of a connection's verified client
// certificate (ZooKeeper's X509AuthenticationProvider: the subject's
// distinguished name, RFC 2253), or false without one.
func x509Identity(cs *tls.ConnectionState) (vocab.Id, bool) {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return vocab.Id{}, false
	}
	return vocab.Id{Scheme: "x509", ID: cs.PeerCertificates[0].Subject.String()}, true
}

// connTLSState is the TLS state of a ZooKeeper connection, nil if it is
// plaintext (or its handshake has not run: call after the first read).
func connTLSState(c net.Conn) *tls.ConnectionState {
	if sc, ok := c.(*sniffConn); ok {
		c = sc.r
	}
	if tc, ok := c.(*tls.Conn); ok {
		st := tc.ConnectionState()
		return &st
	}
	return nil
}
