package compat

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"coord/internal/testcluster"
	"coord/internal/testpki"
	"coord/server"
)

// tlsDialer dials a ZooKeeper server over TLS, as go-zookeeper's WithDialer
// wants it (the ZooKeeper Java client's Netty socket with
// zookeeper.client.secure=true does the same).
func tlsDialer(cfg *tls.Config) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, cfg)
	}
}

func connectTLS(t *testing.T, addr string, cfg *tls.Config) *zk.Conn {
	t.Helper()
	c, events, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithDialer(tlsDialer(cfg)), zk.WithLogger(newLogSink(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	deadline := time.After(wait)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return c
			}
		case <-deadline:
			t.Fatalf("no TLS session on %s within %v", addr, wait)
		}
	}
}

// coord's ZooKeeper port with TLS: TLS and plaintext clients side by side
// on -zk-addr (as ZooKeeper's port unification), TLS only on
// -secure-zk-addr (as its secureClientPort), and no plaintext at all with
// -tls-only. coord only: the ZooKeeper processes of this suite run
// without TLS.
func TestZooKeeperPortTLS(t *testing.T) {
	if target() != "coord" {
		t.Skip("coord's TLS flags; the suite's ZooKeeper runs without TLS")
	}
	pki := testpki.New(t)
	tc := testcluster.New(t, 1, 0, func(cfg *server.Config) {
		pki.UseIn(&cfg.TLSCert, &cfg.TLSKey, &cfg.TLSCA)
		cfg.SecureZKAddr = "127.0.0.1:0"
	})
	s := tc.Servers[0]
	secure := connectTLS(t, s.SecureZKAddr(), pki.ClientTLS(false))
	if _, err := secure.Create("/tls", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	unified := connectTLS(t, s.ZKAddr(), pki.ClientTLS(false))
	if data, _, err := unified.Get("/tls"); err != nil || string(data) != "x" {
		t.Fatalf("get over TLS on the unified port: %q %v", data, err)
	}
	plain := connect(t, "plain", []string{s.ZKAddr()}, clientOpts{})
	if data, _, err := plain.Get("/tls"); err != nil || string(data) != "x" {
		t.Fatalf("get in plaintext on the unified port: %q %v", data, err)
	}
	if out, err := fourLetter(s.ZKAddr(), "ruok", 5*time.Second); err != nil || out != "imok" {
		t.Errorf("ruok in plaintext on the unified port: %q %v", out, err)
	}
	if out, err := fourLetter(s.SecureZKAddr(), "ruok", 2*time.Second); err == nil && out == "imok" {
		t.Error("the TLS-only port answered a plaintext four-letter word")
	}

	// A verified client certificate gives the session the id x509:<subject>
	// (ZooKeeper's X509AuthenticationProvider), which ACLs can name.
	withCert := connectTLS(t, s.ZKAddr(), pki.ClientTLS(true))
	acl := []zk.ACL{{Perms: zk.PermAll, Scheme: "x509", ID: "CN=coord test client"}}
	if _, err := withCert.Create("/cert-only", []byte("c"), 0, acl); err != nil {
		t.Fatalf("create with an x509 ACL: %v", err)
	}
	if data, _, err := withCert.Get("/cert-only"); err != nil || string(data) != "c" {
		t.Errorf("the certificate's holder reads its node: %q %v", data, err)
	}
	if _, _, err := unified.Get("/cert-only"); err != zk.ErrNoAuth {
		t.Errorf("a TLS session without the certificate reads an x509 node: %v, want NoAuth", err)
	}

	only := testcluster.New(t, 1, 0, func(cfg *server.Config) { pki.UseIn(&cfg.TLSCert, &cfg.TLSKey, &cfg.TLSCA); cfg.TLSOnly = true })
	addr := only.Servers[0].ZKAddr()
	if out, err := fourLetter(addr, "ruok", 2*time.Second); err == nil && out == "imok" {
		t.Error("-tls-only answered a plaintext four-letter word")
	}
	c := connectTLS(t, addr, pki.ClientTLS(false))
	if _, _, err := c.Exists("/"); err != nil {
		t.Errorf("exists over TLS with -tls-only: %v", err)
	}
}
