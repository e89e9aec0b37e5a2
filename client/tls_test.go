package client

import (
	"context"
	"testing"
	"time"

	"coord/internal/testcluster"
	"coord/internal/testpki"
	"coord/server"
	"coord/vocab"
)

// WithTLS reaches a TLS server (verifying it against the CA) and presents
// the client certificate where the server requires one.
func TestWithTLS(t *testing.T) {
	pki := testpki.New(t)
	tc := testcluster.New(t, 1, 0, func(cfg *server.Config) { pki.UseIn(&cfg.TLSCert, &cfg.TLSKey, &cfg.TLSCA); cfg.TLSClientAuth = true })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := Connect(ctx, tc.Addrs(), WithTLS(pki.ClientTLS(true)))
	if err != nil {
		t.Fatalf("connect over TLS: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Create(ctx, "/tls", []byte("x"), vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(ctx, 3*time.Second)
	defer cancel2()
	if _, _, err := Connect(short, tc.Addrs(), WithTLS(pki.ClientTLS(false)), WithMaxRetries(2)); err == nil {
		t.Fatal("connected without the client certificate the server requires")
	}
	if _, _, err := Connect(short, tc.Addrs(), WithMaxRetries(2)); err == nil {
		t.Fatal("connected in plaintext to a TLS server")
	}
}
