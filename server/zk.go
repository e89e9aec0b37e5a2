package server

import (
	"crypto/tls"
	"net"
	"time"

	"coord/fsm"
	"coord/server/zkfront"
	"coord/vocab"
	"coord/zk"
)

// The ZooKeeper front end is package server/zkfront: its port, connections,
// jute translation and four-letter words. This file starts it and is the
// server it sees (zkfront.Server).

// Version is what coord reports where ZooKeeper reports its version
// (zkfront.Version).
var Version = zkfront.Version

// DefaultFourLetterWords is the four-letter-word whitelist of a server not
// told otherwise (zkfront.DefaultFourLetterWords: srvr and ruok).
func DefaultFourLetterWords() []string { return zkfront.DefaultFourLetterWords() }

func (s *Server) startZK() error {
	var tc *tls.Config
	if s.tls != nil {
		tc = s.tls.serverConfig()
	}
	c := s.cfg
	fe, err := zkfront.Start(zkfront.Config{
		Addr: c.ZKAddr, SecureAddr: c.SecureZKAddr, TLS: tc, TLSOnly: c.TLSOnly,
		Sessions: s.sess, Logger: s.log,
		HandshakeTimeout: c.HandshakeTimeout, MaxFrameBytes: c.MaxFrameBytes, SASL: len(c.SASLUsers) > 0,
		FourLetterWords: c.FourLetterWords, ReadOnlyMode: c.ReadOnlyMode,
		DataDir: c.DataDir, Tick: c.Tick, MinSessionTimeout: c.MinSessionTimeout, MaxSessionTimeout: c.MaxSessionTimeout,
		MaxClientConns: c.MaxClientConns, Started: s.started,
	}, zkServer{s})
	if err != nil {
		return err
	}
	s.zk = fe
	return nil
}

// ZKAddr returns the ZooKeeper protocol listener's address ("" when off).
func (s *Server) ZKAddr() string {
	if s.zk == nil {
		return ""
	}
	return s.zk.Addr()
}

// SecureZKAddr returns the TLS-only ZooKeeper port's address ("" when off).
func (s *Server) SecureZKAddr() string {
	if s.zk == nil {
		return ""
	}
	return s.zk.SecureAddr()
}

// zkServer is the server as its ZooKeeper front end sees it.
type zkServer struct{ s *Server }

func (z zkServer) Admit(nc net.Conn) (string, string) {
	ip := ipOf(nc.RemoteAddr())
	return ip, z.s.clientConns.acquire(ip)
}

func (z zkServer) Release(ip string) { z.s.clientConns.release(ip) }

func (z zkServer) X509Identity(cs *tls.ConnectionState) (vocab.Id, bool) { return x509Identity(cs) }

func (z zkServer) LeaderWait() time.Duration { return z.s.leaderWait() }
func (z zkServer) Serving() bool             { return z.s.Serving() }
func (z zkServer) ReadOnly() bool            { return z.s.ReadOnly() }
func (z zkServer) Role() string              { return z.s.Role() }
func (z zkServer) View() *fsm.View           { return z.s.View() }

func (z zkServer) Members() int {
	z.s.mu.Lock()
	defer z.s.mu.Unlock()
	return len(z.s.members)
}

func (z zkServer) Quorum() (int64, *zk.QuorumConf) { return z.s.reconf.Quorum() }

func (z zkServer) AcceptFailed()         { z.s.metrics.acceptErrors.Inc() }
func (z zkServer) Refused(reason string) { z.s.metrics.connsRefused.WithLabelValues(reason).Inc() }
