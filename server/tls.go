package server

import (
	"coord/vocab"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// TLS for every client and admin port from one set of PEM files
// (Config.TLSCert, TLSKey, TLSCA): the ZooKeeper port (TLS and plaintext on
// one port, told apart by the first byte, as ZooKeeper's port unification;
// plaintext refused with TLSOnly; server/zkfront's unified.go) and an
// optional TLS-only ZooKeeper port (SecureZKAddr, as ZooKeeper's
// secureClientPort), gRPC (sessions and admin) and HTTP. The peer plane
// has a trust of its own (peerauth.go). The files are read again when they
// change on disk, at most once per tlsReloadEvery, so a rotated
// certificate serves new connections without a restart.

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

// x509Identity is the x509 id of a connection's verified client
// certificate (ZooKeeper's X509AuthenticationProvider: the subject's
// distinguished name, RFC 2253), or false without one.
func x509Identity(cs *tls.ConnectionState) (vocab.Id, bool) {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return vocab.Id{}, false
	}
	return vocab.Id{Scheme: "x509", ID: cs.PeerCertificates[0].Subject.String()}, true
}
