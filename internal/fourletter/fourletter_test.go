package fourletter

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// serve answers each connection of a fresh loopback listener with reply:
// it reads the four-letter word, passes it to reply and writes what that
// returns (nothing: hold is how long to keep the connection open before
// closing it).
func serve(t *testing.T, tlsConf *tls.Config, reply func(word string) (string, time.Duration)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tlsConf != nil {
		l = tls.NewListener(l, tlsConf)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				b := make([]byte, 4)
				if _, err := io.ReadFull(c, b); err != nil {
					return
				}
				out, hold := reply(string(b))
				io.WriteString(c, out)
				time.Sleep(hold)
			}()
		}
	}()
	return l.Addr().String()
}

func TestAsk(t *testing.T) {
	ctx := context.Background()
	addr := serve(t, nil, func(w string) (string, time.Duration) {
		switch w {
		case "ruok":
			return "imok", 0
		case "slow":
			return "partial", 5 * time.Second
		}
		return "", 0 // a closed connection without an answer
	})
	o := Options{DialTimeout: time.Second, Timeout: 2 * time.Second}

	if out, err := Ask(ctx, addr, "ruok", o); err != nil || out != "imok" {
		t.Fatalf("ruok: %q, %v", out, err)
	}
	if out, err := Ask(ctx, addr, "none", o); err != nil || out != "" {
		t.Fatalf("closed without an answer: %q, %v; want \"\", nil", out, err)
	}

	// Timeout bounds the read: what arrived comes back with a timeout.
	start := time.Now()
	out, err := Ask(ctx, addr, "slow", Options{Timeout: 300 * time.Millisecond})
	var nerr net.Error
	if out != "partial" || !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("slow: %q, %v; want the partial answer and a timeout", out, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("slow: took %v, Timeout 300ms", d)
	}
	// So does the context's deadline, when it is sooner.
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if out, err := Ask(dctx, addr, "slow", o); out != "partial" || !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("slow with a context deadline: %q, %v", out, err)
	}
	// And cancelling the context ends the wait with its error.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := Ask(cctx, addr, "slow", Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("slow, cancelled: %v, want context.Canceled", err)
	}

	// Nothing listening: the dial's error.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	if _, err := Ask(ctx, dead, "ruok", o); err == nil {
		t.Fatal("a closed port answered")
	}
}

func TestAskTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	addr := serve(t, &tls.Config{Certificates: []tls.Certificate{cert}}, func(w string) (string, time.Duration) {
		return w + " over TLS", 0
	})
	ctx := context.Background()
	o := Options{DialTimeout: time.Second, Timeout: 5 * time.Second, TLS: &tls.Config{RootCAs: pool}}
	// The certificate names 127.0.0.1: without a ServerName the host of
	// addr is verified.
	if out, err := Ask(ctx, addr, "srvr", o); err != nil || out != "srvr over TLS" {
		t.Fatalf("srvr over TLS: %q, %v", out, err)
	}
	// A CA that did not sign the certificate: the handshake fails.
	o.TLS = &tls.Config{RootCAs: x509.NewCertPool()}
	if _, err := Ask(ctx, addr, "srvr", o); err == nil || !strings.HasPrefix(err.Error(), "TLS: ") {
		t.Fatalf("unknown CA: %v, want a TLS: error", err)
	}
}

// selfSigned is a certificate for IP 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "fourletter test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
