package main

import (
	"testing"
	"time"

	"coord/internal/testcluster"
	"coord/internal/testpki"
	"coord/server"
)

// TestHealthWithTLS: `coord health` passes against a server with TLS on
// (issue 27: it got 400, so the image's HEALTHCHECK could never pass): with
// no flags (it asks again over https), with -tls-ca (verified), and with a
// client certificate where the server requires one; without the
// certificate there, it fails.
func TestHealthWithTLS(t *testing.T) {
	pki := testpki.New(t)
	c := testcluster.New(t, 1, 0, func(cfg *server.Config) { pki.UseIn(&cfg.TLSCert, &cfg.TLSKey, &cfg.TLSCA) })
	addr := c.Servers[0].HTTPAddr()
	waitHealthy(t, addr)
	for _, args := range [][]string{
		{"-http-addr", addr},
		{"-http-addr", "https://" + addr},
		{"-http-addr", addr, "-tls-ca", pki.CAFile},
	} {
		if rc := runHealth(args); rc != 0 {
			t.Errorf("coord health %q against a TLS server: exit %d, want 0", args, rc)
		}
	}
	if rc := runHealth([]string{"-http-addr", "127.0.0.1:1", "-timeout", "1s"}); rc != 1 {
		t.Errorf("coord health against nothing: exit %d, want 1", rc)
	}

	mutual := testpki.New(t)
	files := mutual.WriteClientFiles(t)
	cm := testcluster.New(t, 1, 0, func(cfg *server.Config) {
		mutual.UseIn(&cfg.TLSCert, &cfg.TLSKey, &cfg.TLSCA)
		cfg.TLSClientAuth = true
	})
	maddr := cm.Servers[0].HTTPAddr()
	if rc := runHealth([]string{"-http-addr", maddr}); rc != 1 {
		t.Errorf("coord health without a client certificate against -tls-client-auth: exit %d, want 1", rc)
	}
	if rc := runHealth([]string{"-http-addr", maddr, "-tls-cert", files.CertFile, "-tls-key", files.KeyFile}); rc != 0 {
		t.Errorf("coord health with a client certificate: exit %d, want 0", rc)
	}
}

// waitHealthy waits until the server reports healthy (a leader, serving).
func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	for range 100 {
		if runHealth([]string{"-http-addr", addr, "-timeout", "1s"}) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never healthy", addr)
}
