package testpki_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"coord/internal/testpki"
)

// handshake runs a TLS handshake over loopback TCP between a server presenting
// the PKI's server files (requiring a client certificate if mutual) and a
// client configured by conf; it returns the client's error and the
// server's.
func handshake(t *testing.T, p *testpki.PKI, conf *tls.Config, mutual bool) (error, error) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	srvConf := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: p.CA}
	if mutual {
		srvConf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	// Loopback TCP, not net.Pipe: a side that gives up writes its alert
	// while the other still writes its flight, which an unbuffered pipe
	// deadlocks.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		a, err := l.Accept()
		if err != nil {
			done <- err
			return
		}
		defer a.Close()
		a.SetDeadline(time.Now().Add(10 * time.Second))
		done <- tls.Server(a, srvConf).Handshake()
	}()
	b, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.SetDeadline(time.Now().Add(10 * time.Second))
	conf = conf.Clone()
	conf.ServerName = "127.0.0.1"
	cerr := tls.Client(b, conf).Handshake()
	b.Close()
	return cerr, <-done
}

// The CA signs a server certificate for 127.0.0.1 that a client trusting
// the CA accepts, and a client certificate such a server accepts; a
// rotation replaces the server's files; the client files load as a pair.
func TestPKI(t *testing.T) {
	p := testpki.New(t)
	if cerr, serr := handshake(t, p, p.ClientTLS(true), true); cerr != nil || serr != nil {
		t.Fatalf("mutual TLS with the client certificate: client %v, server %v", cerr, serr)
	}
	if _, serr := handshake(t, p, p.ClientTLS(false), true); serr == nil {
		t.Fatal("a server requiring a client certificate accepted a client without one")
	}
	if cerr, _ := handshake(t, p, &tls.Config{}, false); cerr == nil {
		t.Fatal("a client that does not trust the CA accepted the server")
	}

	var cert, key, ca string
	p.UseIn(&cert, &key, &ca)
	if cert != p.CertFile || key != p.KeyFile || ca != p.CAFile {
		t.Fatalf("UseIn set %q %q %q", cert, key, ca)
	}

	p.IssueServer(t, 7)
	pair, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || leaf.SerialNumber.Int64() != 7 {
		t.Fatalf("after IssueServer(7): serial %v, %v", leaf.SerialNumber, err)
	}

	f := p.WriteClientFiles(t)
	pair, err = tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil || leaf.Subject.CommonName != "coord test client" {
		t.Fatalf("client files: %v %v", leaf, err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: p.CA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the client certificate does not verify against the CA: %v", err)
	}
}
