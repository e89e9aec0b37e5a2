package server

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"coord/server/replica"
)

// ClusterKeyName is the cluster key's file in a data directory: a server
// given neither peer certificates nor a key generates one there on first
// start and uses it from then on.
const ClusterKeyName = "cluster.key"

// GenerateClusterKey returns a new cluster key file's contents: 32 random
// bytes in base64 and a newline.
func GenerateClusterKey() ([]byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("server: drawing a cluster key: %w", err)
	}
	return []byte(base64.StdEncoding.EncodeToString(b[:]) + "\n"), nil
}

// ParseClusterKey decodes a cluster key file's contents (base64, at least
// 16 bytes once decoded).
func ParseClusterKey(text []byte) ([]byte, error) {
	s := strings.TrimSpace(string(text))
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if key, err = base64.RawStdEncoding.DecodeString(s); err != nil {
			return nil, errors.New("not base64 (coord keygen writes a key)")
		}
	}
	if len(key) < replica.MinClusterKeyBytes {
		return nil, fmt.Errorf("%d bytes, want at least %d (coord keygen writes 32)", len(key), replica.MinClusterKeyBytes)
	}
	return key, nil
}

// ReadClusterKey reads and decodes a cluster key file.
func ReadClusterKey(path string) ([]byte, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: cluster key: %w", err)
	}
	key, err := ParseClusterKey(text)
	if err != nil {
		return nil, fmt.Errorf("server: cluster key %s: %w", path, err)
	}
	return key, nil
}

// clusterKey returns the key this server proves membership with, if any:
// the configured one, else the one in its data directory, else (a server
// without peer certificates, started alone) a new one written there. A
// server that has peers or joins a cluster and has neither a key nor peer
// certificates cannot prove it is a member: it refuses to start.
func (s *Server) clusterKey() ([]byte, error) {
	cfg := s.cfg
	switch {
	case len(cfg.ClusterKey) > 0:
		return cfg.ClusterKey, nil
	case cfg.ClusterKeyFile != "":
		return ReadClusterKey(cfg.ClusterKeyFile)
	case cfg.PeerCert != "":
		return nil, nil
	}
	path := filepath.Join(cfg.DataDir, ClusterKeyName)
	if _, err := os.Stat(path); err == nil {
		return ReadClusterKey(path)
	}
	others := len(cfg.Join) + len(cfg.GossipJoin)
	for _, p := range cfg.Peers {
		if p.ID != cfg.ID {
			others++
		}
	}
	if others > 0 {
		return nil, errors.New("server: this server has other servers (-peers, -join) but no way to prove it is a member: " +
			"give every server the same -cluster-key-file (coord keygen writes one; a server started alone keeps its own in " +
			filepath.Join("<data-dir>", ClusterKeyName) + "), or -peer-cert, -peer-key and -peer-ca")
	}
	text, err := GenerateClusterKey()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	if err := writeFileAtomic(path, text, 0o600); err != nil {
		return nil, fmt.Errorf("server: writing the cluster key: %w", err)
	}
	s.log.Info("generated a cluster key: another server joins this one only with it (-cluster-key-file)", "path", path)
	return ParseClusterKey(text)
}

// peerAuth is how this server and its peers authenticate each other:
// mutual TLS under the peer CA when peer certificates are configured, else
// the cluster key. It also settles gossip's key (the configured one, else
// one derived from the cluster key).
func (s *Server) peerAuth() (replica.PeerAuth, error) {
	key, err := s.clusterKey()
	if err != nil {
		return replica.PeerAuth{}, err
	}
	if len(s.cfg.GossipKey) == 0 && s.cfg.GossipAddr != "" {
		if key == nil {
			return replica.PeerAuth{}, errors.New("server: gossip needs a key beside peer certificates: -gossip-key or -cluster-key-file (or -gossip-addr '' to turn gossip off)")
		}
		if s.cfg.GossipKey, err = replica.GossipKey(key); err != nil {
			return replica.PeerAuth{}, err
		}
	}
	if s.cfg.PeerCert == "" {
		return replica.KeyAuth(key)
	}
	files, err := newTLSFiles(s.cfg.PeerCert, s.cfg.PeerKey, s.cfg.PeerCA, true)
	if err != nil {
		return replica.PeerAuth{}, fmt.Errorf("%w (peer certificates)", err)
	}
	return files.peerAuth(), nil
}

// peerAuth is mutual TLS under the peer CA: each end presents its
// certificate and accepts only one the peer CA signed. The peer CA is the
// servers' own, so a client certificate (signed by -tls-ca) is never a
// member. The files are re-read when they change.
func (f *tlsFiles) peerAuth() replica.PeerAuth {
	verify := func(cs tls.ConnectionState) error {
		_, pool := f.current()
		if len(cs.PeerCertificates) == 0 {
			return errors.New("server: peer presented no certificate: not a member")
		}
		opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return fmt.Errorf("server: peer certificate not signed by the peer CA: not a member: %w", err)
		}
		return nil
	}
	getCert := func() []tls.Certificate { cert, _ := f.current(); return []tls.Certificate{*cert} }
	return replica.PeerAuth{
		Server: &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
				// The CA may be rotated: verify against the current pool.
				return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: getCert(),
					ClientAuth: tls.RequireAnyClientCert, VerifyConnection: verify}, nil
			},
		},
		Client: &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				cert, _ := f.current()
				return cert, nil
			},
			InsecureSkipVerify: true, // verify checks the chain against the current peer CA
			VerifyConnection:   verify,
		},
	}
}
