package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"coord/client"
	"coord/internal/freeport"
	"coord/vocab"
)

// TestCertsScript runs docs/testdata/certs.sh, the openssl recipe that
// docs/security.md shows verbatim, and starts two real coord processes with
// its files: TLS with required client certificates on the client ports
// (-tls-cert, -tls-key, -tls-ca, -tls-client-auth) and peer certificates on
// the peer plane (-peer-cert, -peer-key, -peer-ca). `coord health` checks
// the server certificate against IP 127.0.0.1, coord's Go client against
// DNS name localhost, with the client certificate; the second server serves
// the first one's write only if the servers accepted each other's peer
// certificates.
func TestCertsScript(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	if testing.Short() {
		t.Skip("builds coord and starts two processes")
	}
	script, err := os.ReadFile("../../docs/testdata/certs.sh")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("```sh\n"+string(script)+"```\n")) {
		t.Fatal("docs/security.md does not show docs/testdata/certs.sh verbatim (in a sh block)")
	}

	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if out, err := exec.Command("sh", "../../docs/testdata/certs.sh", certs, "localhost", "coord2").CombinedOutput(); err != nil {
		t.Fatalf("certs.sh: %v\n%s", err, out)
	}
	f := func(name string) string { return filepath.Join(certs, name) }
	bin := buildCoord(t, dir)

	type srv struct{ raft, grpc, zk, http string }
	var s [2]srv
	a, err := freeport.Addrs(4 * len(s))
	if err != nil {
		t.Fatal(err)
	}
	for i := range s {
		s[i] = srv{a[4*i], a[4*i+1], a[4*i+2], a[4*i+3]}
	}
	peerNames := []string{"localhost", "coord2"}
	start := func(i int, extra ...string) {
		other := s[1-i]
		args := append([]string{"-id", fmt.Sprintf("s%d", i+1), "-data-dir", filepath.Join(dir, fmt.Sprintf("d%d", i+1)),
			"-raft-addr", s[i].raft, "-grpc-addr", s[i].grpc, "-zk-addr", s[i].zk, "-http-addr", s[i].http, "-gossip-addr", "",
			"-peers", fmt.Sprintf("s%d=%s,%s", 2-i, other.raft, other.grpc),
			"-tls-cert", f("server.pem"), "-tls-key", f("server-key.pem"), "-tls-ca", f("ca.pem"), "-tls-client-auth",
			"-peer-cert", f("peer-" + peerNames[i] + ".pem"), "-peer-key", f("peer-" + peerNames[i] + "-key.pem"), "-peer-ca", f("peer-ca.pem")},
			extra...)
		cmd := exec.Command(bin, args...)
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("server s%d:\n%s", i+1, log.String())
			}
		})
	}
	start(0)
	start(1, "-bootstrap=false")

	// coord health over https, the certificate checked for 127.0.0.1.
	health := func(args ...string) error {
		return exec.Command(bin, append([]string{"health", "-http-addr", "https://" + s[0].http, "-timeout", "2s"}, args...)...).Run()
	}
	withCert := []string{"-tls-ca", f("ca.pem"), "-tls-cert", f("client.pem"), "-tls-key", f("client-key.pem")}
	deadline := time.Now().Add(30 * time.Second)
	for health(withCert...) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("coord health with the script's CA and client certificate: %v", health(withCert...))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if health("-tls-ca", f("ca.pem")) == nil {
		t.Error("coord health without a client certificate passed against -tls-client-auth")
	}

	// The Go client, the certificate checked for localhost.
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(f("ca.pem"))
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ca.pem: %v", err)
	}
	cert, err := tls.LoadX509KeyPair(f("client.pem"), f("client-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func(addr string) *client.Conn {
		c, _, err := client.Connect(ctx, []string{addr}, client.WithTLS(tlsCfg))
		if err != nil {
			t.Fatalf("connect to %s over TLS: %v", addr, err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	_, grpcPort, _ := net.SplitHostPort(s[0].grpc)
	c1 := connect("localhost:" + grpcPort)
	if _, err := c1.Create(ctx, "/certs", []byte("ok"), vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}

	// The second server joined over the peer plane: it serves the write.
	c2 := connect(s[1].grpc)
	for {
		data, _, err := c2.Get(ctx, "/certs")
		if err == nil && string(data) == "ok" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the second server never served /certs: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
