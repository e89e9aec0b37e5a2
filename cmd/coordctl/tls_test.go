package main

import (
	"strings"
	"testing"
	"time"

	"coord/internal/testpki"
)

// coordctl over TLS to a coord process started with -tls-cert, -tls-key,
// -tls-ca and -tls-client-auth: with the CA and a client certificate it
// works (and the certificate, listed in -admin-x509, is an admin
// identity); without the certificate, or in plaintext, no server answers.
func TestTLS(t *testing.T) {
	pki := testpki.New(t)
	client := pki.WriteClientFiles(t)
	c := newProcs(t, t.TempDir(), 1, 0)
	p := c.nodes[0]
	p.args = append(p.args, "-tls-cert", pki.CertFile, "-tls-key", pki.KeyFile, "-tls-ca", pki.CAFile, "-tls-client-auth",
		"-tls-only", "-admin-x509", "CN=ops,O=example;CN=coord test client")
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			t.Logf("log:\n%s", tail(p.log))
		}
	})
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	tlsArgs := []string{"--cacert", pki.CAFile, "--cert", client.CertFile, "--key", client.KeyFile}
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := ctl(t, p.grpc, "", append(tlsArgs, "create", "/tls", "x")...)
		if r.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordctl over TLS never succeeded: exit %d, %s", r.code, r.stderr)
		}
		time.Sleep(100 * time.Millisecond) // the server is still starting
	}
	if r := ctl(t, p.grpc, "", append(tlsArgs, "get", "/tls")...); r.code != 0 || strings.TrimSpace(r.stdout) != "x" {
		t.Fatalf("get over TLS: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// The client certificate is in -admin-x509: an admin identity, no --user.
	if r := ctl(t, p.grpc, "", append(tlsArgs, "sessions")...); r.code != 0 || !strings.HasPrefix(r.stdout, "SESSION") {
		t.Fatalf("sessions with an admin certificate: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// Four-letter words on the TLS-only ZooKeeper port: over TLS with the
	// flags, answered; in plaintext, an error that says why, not an empty
	// answer and exit 0 (issue 27 item 6).
	if r := ctl(t, p.grpc, "", append(tlsArgs, "--zk-servers", p.zk, "4lw", "srvr")...); r.code != 0 || !strings.Contains(r.stdout, "Mode:") {
		t.Fatalf("4lw srvr over TLS: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := ctl(t, p.grpc, "", "--zk-servers", p.zk, "4lw", "srvr"); r.code == 0 || !strings.Contains(r.stderr, "TLS") {
		t.Fatalf("4lw srvr in plaintext on a -tls-only port: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	fails(t, p.grpc, exitUnreachable, "--dial-timeout", "2s", "--cacert", pki.CAFile, "get", "/tls")
	fails(t, p.grpc, exitUnreachable, "--dial-timeout", "2s", "get", "/tls")
}
