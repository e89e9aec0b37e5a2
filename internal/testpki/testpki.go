// Package testpki is a throwaway certificate authority for tests of TLS on
// loopback: a CA, a certificate for 127.0.0.1 and localhost that servers
// use both to serve and to reach each other, and a client certificate, as
// PEM files in a temporary directory. It imports no coord package, so
// every package's tests may use it, server's own among them.
package testpki

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

// TB is the part of testing.TB the PKI uses.
type TB interface {
	Helper()
	Fatal(args ...any)
	TempDir() string
}

// PKI is a CA and the certificates it issued.
type PKI struct {
	CAFile, CertFile, KeyFile string // PEM files: the CA, the servers' certificate and key
	CA                        *x509.CertPool
	Client                    tls.Certificate // signed by the CA, for mutual TLS; CN "coord test client"
	caCert                    *x509.Certificate
	caKey                     *ecdsa.PrivateKey
	dir                       string
}

// New writes a CA and a server certificate (serial 2) into a temporary
// directory and makes a client certificate (serial 3).
func New(tb TB) *PKI {
	tb.Helper()
	p := &PKI{dir: tb.TempDir()}
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
	cert, key2 := p.Issue(tb, 3, "coord test client", false)
	p.Client = tls.Certificate{Certificate: [][]byte{cert}, PrivateKey: key2}
	return p
}

// IssueServer writes a new server certificate and key with this serial
// number over CertFile and KeyFile (a rotation).
func (p *PKI) IssueServer(tb TB, serial int64) {
	tb.Helper()
	der, key := p.Issue(tb, serial, "coord test server", true)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	// Key first, then the certificate: a reader between the two writes
	// sees a mismatched pair and keeps the old one.
	writePEM(tb, p.KeyFile, "EC PRIVATE KEY", kb)
	writePEM(tb, p.CertFile, "CERTIFICATE", der)
}

// Issue signs a new certificate for the common name name (DER) and returns
// it with its key: a client certificate, or, if server, one that also
// serves 127.0.0.1 and localhost.
func (p *PKI) Issue(tb TB, serial int64, name string, server bool) ([]byte, *ecdsa.PrivateKey) {
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
func (p *PKI) ClientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.CA, MinVersion: tls.VersionTLS12}
	if withCert {
		c.Certificates = []tls.Certificate{p.Client}
	}
	return c
}

// UseIn turns TLS on in a server's configuration by setting its
// certificate, key and CA files; the arguments are &cfg.TLSCert,
// &cfg.TLSKey and &cfg.TLSCA of a server.Config (this package does not
// import server).
func (p *PKI) UseIn(cert, key, ca *string) {
	*cert, *key, *ca = p.CertFile, p.KeyFile, p.CAFile
}

// ClientFiles are a client certificate and key as PEM files.
type ClientFiles struct{ CertFile, KeyFile string }

// WriteClientFiles writes the client certificate and its key as PEM files
// (for tools that take files, such as coordctl's --cert and --key).
func (p *PKI) WriteClientFiles(tb TB) ClientFiles {
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
