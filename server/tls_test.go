package server

import (
	"context"
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"coord/api"
	"coord/vocab"
)

// sessionOver opens a session stream with these dial options and returns
// the connect answer's error.
func sessionOver(t *testing.T, addr string, opts ...grpc.DialOption) (*api.ConnectResponse, error) {
	t.Helper()
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := api.NewCoordClient(cc).Session(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&api.ClientMessage{Msg: &api.ClientMessage_Connect{Connect: &api.ConnectRequest{TimeoutMs: 10000}}}); err != nil {
		return nil, err
	}
	msg, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	return msg.GetConnected(), nil
}

// With -tls-cert, -tls-key and -tls-ca a 3-server cluster forms over TLS
// (raft and the server-to-server gRPC), clients reach gRPC and HTTP over
// TLS and not in plaintext, and a session's writes replicate.
func TestTLSEverywhere(t *testing.T) {
	t.Parallel()
	pki := NewTestPKI(t)
	c := NewTestClusterWith(t, 3, 0, func(cfg *Config) { pki.UseIn(cfg) })
	follower := c.Servers[(c.Leader()+1)%3]

	tlsCreds := grpc.WithTransportCredentials(credentials.NewTLS(pki.ClientTLS(false)))
	if r, err := sessionOver(t, follower.GRPCAddr(), tlsCreds); err != nil || r.GetSessionId() == 0 {
		t.Fatalf("a TLS session on a follower: %v %v", r, err)
	}
	if _, err := sessionOver(t, follower.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials())); err == nil {
		t.Fatal("a plaintext gRPC session was accepted by a TLS server")
	}

	// A write through a follower reaches the leader (forwarded over TLS)
	// and every server applies it (raft over TLS).
	cc, err := grpc.NewClient(follower.GRPCAddr(), tlsCreds)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := api.NewCoordClient(cc).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs := &rawSession{t: t, cc: cc, stream: stream, cancel: cancel}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(stream.Send(&api.ClientMessage{Msg: &api.ClientMessage_Connect{Connect: &api.ConnectRequest{TimeoutMs: 10000}}}))
	_, err = stream.Recv()
	must(err)
	mustOK(t, rs.create("/over-tls", "x", vocab.ModePersistent))
	mustOK(t, rs.sync())
	for _, s := range c.Servers {
		if !c.WaitFor(10*time.Second, func() bool { _, err := s.View().Exists("/over-tls"); return err == nil }) {
			t.Errorf("%s never applied the write", s.ID())
		}
	}

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientTLS(false)}, Timeout: 10 * time.Second}
	resp, err := client.Get("https://" + follower.HTTPAddr() + "/health")
	if err != nil {
		t.Fatalf("HTTPS /health: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HTTPS /health: %s", resp.Status)
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + follower.HTTPAddr() + "/health"); err == nil && resp.StatusCode == http.StatusOK {
		resp.Body.Close()
		t.Error("plain HTTP /health answered 200 on a TLS server")
	}
}

// A certificate rotated on disk is used by new connections without a
// restart; with -tls-client-auth a client without a certificate is
// refused and one with a certificate the CA signed is served.
func TestTLSRotationAndClientAuth(t *testing.T) {
	t.Parallel()
	pki := NewTestPKI(t)
	c := NewTestClusterWith(t, 1, 0, func(cfg *Config) { pki.UseIn(cfg); cfg.TLSClientAuth = true })
	addr := c.Servers[0].GRPCAddr()

	withCert := grpc.WithTransportCredentials(credentials.NewTLS(pki.ClientTLS(true)))
	if _, err := sessionOver(t, addr, withCert); err != nil {
		t.Fatalf("a session with a client certificate: %v", err)
	}
	if _, err := sessionOver(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(pki.ClientTLS(false)))); err == nil {
		t.Fatal("a session without a client certificate was accepted with -tls-client-auth")
	}

	serial := func() int64 {
		conn, err := tls.Dial("tcp", addr, pki.ClientTLS(true))
		if err != nil {
			t.Fatalf("TLS dial: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != 2 {
		t.Fatalf("serving certificate serial %d, want 2", got)
	}
	pki.IssueServer(t, 7)
	deadline := time.Now().Add(10 * time.Second)
	for serial() != 7 {
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate was not served within 10s")
		}
		time.Sleep(100 * time.Millisecond) // the files are checked once a second
	}
	if _, err := sessionOver(t, addr, withCert); err != nil {
		t.Fatalf("a session after the rotation: %v", err)
	}
}

// A missing or mismatched key is a clear error at start, not at the first
// connection.
func TestTLSBadFiles(t *testing.T) {
	pki := NewTestPKI(t)
	cfg := testConfig(t, "bad")
	cfg.Bootstrap = true
	cfg.TLSCert, cfg.TLSKey = pki.CertFile, pki.CAFile // a certificate, not a key
	if _, err := New(cfg); err == nil {
		t.Fatal("a server started with a certificate file as its key")
	}
	cfg.TLSCert, cfg.TLSKey = pki.CertFile+".missing", pki.KeyFile
	if _, err := New(cfg); err == nil {
		t.Fatal("a server started with a missing certificate file")
	}
	cfg.TLSCert, cfg.TLSKey, cfg.TLSOnly = "", "", true
	if _, err := New(cfg); err == nil {
		t.Fatal("a server started with -tls-only and no certificate")
	}
}
