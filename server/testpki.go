package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TestPKI is a throwaway certificate authority and certificates for
// loopback tests of TLS: the CA, a certificate for 127.0.0.1 that servers
// use both to serve and to reach each other, and a client certificate.
type TestPKI struct {
	CAFile, CertFile, KeyFile string // PEM files: the CA, the servers' certificate and key
	CA                        *x509.CertPool
	Client                    tls.Certificate // signed by the CA, for mutual TLS
	caCert                    *x509.Certificate
	caKey                     *ecdsa.PrivateKey
	dir                       string
}

// NewTestPKI writes a CA and a server certificate into a temporary
// directory.
func NewTestPKI(tb TB) *TestPKI {
	tb.Helper()
	p := &TestPKI{dir: tb.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "coord test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	p.caCert, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.CA = x509.NewCertPool()
	p.CA.AddCert(p.caCert)
	p.CAFile = filepath.Join(p.dir, "ca.pem")
	writePEM(tb, p.CAFile, "CERTIFICATE", der)
	p.CertFile, p.KeyFile = filepath.Join(p.dir, "server.pem"), filepath.Join(p.dir, "server-key.pem")
	p.IssueServer(tb, 2)
	cert, key2 := p.issue(tb, 3, "coord test client", false)
	p.Client = tls.Certificate{Certificate: [][]byte{cert}, PrivateKey: key2}
	return p
}

// IssueServer writes a new server certificate and key with this serial
// number over CertFile and KeyFile (a rotation).
func (p *TestPKI) IssueServer(tb TB, serial int64) {
	tb.Helper()
	der, key := p.issue(tb, serial, "coord test server", true)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	// Key first, then the certificate: a reader between the two writes
	// sees a mismatched pair and keeps the old one.
	writePEM(tb, p.KeyFile, "EC PRIVATE KEY", kb)
	writePEM(tb, p.CertFile, "CERTIFICATE", der)
}

func (p *TestPKI) issue(tb TB, serial int64, name string, server bool) ([]byte, *ecdsa.PrivateKey) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		tb.Fatal(err)
	}
	return der, key
}

func writePEM(tb TB, path, typ string, der []byte) {
	tb.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

// ClientTLS is a client configuration that trusts the CA (and presents the
// client certificate if withCert).
func (p *TestPKI) ClientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.CA, MinVersion: tls.VersionTLS12}
	if withCert {
		c.Certificates = []tls.Certificate{p.Client}
	}
	return c
}

// UseIn turns TLS on in cfg with these files.
func (p *TestPKI) UseIn(cfg *Config) {
	cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = p.CertFile, p.KeyFile, p.CAFile
}

// ClientFiles are a client certificate and key as PEM files.
type ClientFiles struct{ CertFile, KeyFile string }

// WriteClientFiles writes the client certificate and its key as PEM files
// (for tools that take files, such as coordctl's --cert and --key).
func (p *TestPKI) WriteClientFiles(tb TB) ClientFiles {
	tb.Helper()
	f := ClientFiles{CertFile: filepath.Join(p.dir, "client.pem"), KeyFile: filepath.Join(p.dir, "client-key.pem")}
	kb, err := x509.MarshalECPrivateKey(p.Client.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		tb.Fatal(err)
	}
	writePEM(tb, f.KeyFile, "EC PRIVATE KEY", kb)
	writePEM(tb, f.CertFile, "CERTIFICATE", p.Client.Certificate[0])
	return f
}
