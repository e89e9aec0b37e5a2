package replica

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// MinClusterKeyBytes is the shortest cluster key accepted.
const MinClusterKeyBytes = 16

// KeyAuth is peer authentication by a cluster key, a secret every member
// holds: each end derives one ed25519 key pair from it and presents a
// certificate of that public key, and each accepts only a peer whose
// certificate carries the same public key. TLS 1.3's CertificateVerify
// proves the peer holds the private key, so only a holder of the cluster
// key passes, and the traffic is encrypted. Nothing of the key itself
// crosses the wire.
func KeyAuth(key []byte) (PeerAuth, error) {
	if len(key) < MinClusterKeyBytes {
		return PeerAuth{}, fmt.Errorf("server: the cluster key has %d bytes, want at least %d", len(key), MinClusterKeyBytes)
	}
	seed, err := hkdf.Key(sha256.New, key, nil, "coord peer identity v1", ed25519.SeedSize)
	if err != nil {
		return PeerAuth{}, err
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "coord cluster member"},
		NotBefore:    time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:     time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, pub, priv)
	if err != nil {
		return PeerAuth{}, fmt.Errorf("server: cluster key certificate: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}
	verify := func(raw [][]byte, _ [][]*x509.Certificate) error {
		if plantedNoPeerCheck {
			return nil
		}
		if len(raw) == 0 {
			return errors.New("server: peer presented no certificate: not a member")
		}
		leaf, err := x509.ParseCertificate(raw[0])
		if err != nil {
			return fmt.Errorf("server: peer certificate: %w", err)
		}
		got, ok := leaf.PublicKey.(ed25519.PublicKey)
		if !ok || subtle.ConstantTimeCompare(got, pub) != 1 {
			return errors.New("server: peer does not hold this cluster's key: not a member")
		}
		return nil
	}
	return PeerAuth{
		Server: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
			ClientAuth: tls.RequireAnyClientCert, VerifyPeerCertificate: verify},
		Client: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
			InsecureSkipVerify: true, VerifyPeerCertificate: verify}, // verify checks the key instead
	}, nil
}

// plantedNoPeerCheck is false except in builds with the peerplanted tag
// (planted_peer.go): the peer check removed, a regression the attack suite
// must catch.
var plantedNoPeerCheck bool

// GossipKey derives memberlist's 32-byte gossip key from the cluster key,
// so gossip is authenticated and encrypted with nothing more to configure.
func GossipKey(key []byte) ([]byte, error) {
	if len(key) < MinClusterKeyBytes {
		return nil, fmt.Errorf("server: the cluster key has %d bytes, want at least %d", len(key), MinClusterKeyBytes)
	}
	return hkdf.Key(sha256.New, key, nil, "coord gossip v1", 32)
}
