package zkfront

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"sync"
)

// The ZooKeeper port serves TLS and plaintext on one port, told apart by
// the first byte, as ZooKeeper's port unification does (plaintext refused
// with Config.TLSOnly); the TLS-only port (Config.SecureAddr) is a plain
// TLS listener. The certificates are the server's (Config.TLS).

// unifiedListener serves TLS and, unless tlsOnly, plaintext on one port: a
// connection whose first byte is a TLS handshake record (0x16) is TLS.
// Telling them apart waits for the client's first byte, which the accept
// loop's handshake timeout bounds.
type unifiedListener struct {
	net.Listener
	tls     *tls.Config
	tlsOnly bool
}

func (l *unifiedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, l: l}, nil
}

// sniffConn decides between TLS and plaintext at its first Read.
type sniffConn struct {
	net.Conn
	l    *unifiedListener
	once sync.Once
	r    net.Conn // the connection to read and write through once decided
	err  error
}

func (c *sniffConn) decide() {
	br := bufio.NewReader(c.Conn)
	first, err := br.Peek(1)
	if err != nil {
		c.err = err
		return
	}
	buffered := &bufferedConn{Conn: c.Conn, r: br}
	if first[0] == 0x16 {
		c.r = tls.Server(buffered, c.l.tls)
		return
	}
	if c.l.tlsOnly {
		c.err = errPlaintextRefused
		c.Conn.Close()
		return
	}
	c.r = buffered
}

var errPlaintextRefused = errors.New("server: plaintext connection refused (TLS only)")

func (c *sniffConn) Read(p []byte) (int, error) {
	c.once.Do(c.decide)
	if c.err != nil {
		return 0, c.err
	}
	return c.r.Read(p)
}

func (c *sniffConn) Write(p []byte) (int, error) {
	c.once.Do(c.decide)
	if c.err != nil {
		return 0, c.err
	}
	return c.r.Write(p)
}

// Close closes the TCP connection (a TLS close_notify is not sent).
func (c *sniffConn) Close() error { return c.Conn.Close() }

// bufferedConn reads through a bufio.Reader that may hold peeked bytes.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// connTLSState is the TLS state of a ZooKeeper connection, nil if it is
// plaintext (or its handshake has not run: call after the first read).
func connTLSState(c net.Conn) *tls.ConnectionState {
	if sc, ok := c.(*sniffConn); ok {
		c = sc.r
	}
	if tc, ok := c.(*tls.Conn); ok {
		st := tc.ConnectionState()
		return &st
	}
	return nil
}
