package memnet

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// link is one connection: its two ends and the hosts they are on.
type link struct {
	n        *Network
	from, to string // the dialer's host, the listener's
	a, b     *Conn  // the dialer's end, the listener's
	closed   atomic.Int32
}

func newLink(n *Network, from, to string, local, remote Addr) *link {
	ab, ba := newPipe(), newPipe()
	l := &link{n: n, from: from, to: to}
	l.a = newConn(l, ba, ab, local, remote)
	l.b = newConn(l, ab, ba, remote, local)
	return l
}

// reset breaks the connection, as a cut does: both ends' reads and writes
// fail with a connection reset (syscall.ECONNRESET), what was in flight is
// lost.
func (l *link) reset() {
	l.a.out.reset()
	l.b.out.reset()
}

// Conn is one end of a memnet connection: a net.Conn.
//
//   - Write copies into the connection's buffer (BufferSize per direction)
//     and returns; it blocks only while the buffer is full. Concurrent
//     Writes do not interleave: each one's bytes arrive together.
//   - Read returns what is buffered, at most len(b) bytes, or waits for
//     some. Once the peer closed (Close or CloseWrite) and the buffer is
//     drained, Read returns io.EOF.
//   - After Close, this end's Read and Write fail with an error that wraps
//     net.ErrClosed; the peer's Writes fail with a broken pipe
//     (syscall.EPIPE), and what it wrote and this end did not read is
//     dropped.
//   - A cut (Partition, Isolate) or the close of a listener that never
//     accepted it resets the connection: reads and writes on both ends fail
//     with syscall.ECONNRESET.
//   - Deadlines behave as on a TCP connection: a Read or Write past its
//     deadline (one in progress too) fails with an error that wraps
//     os.ErrDeadlineExceeded, a net.Error whose Timeout is true; a Write
//     returns how much it wrote. A new deadline applies to calls in
//     progress; the zero time removes it.
//
// Errors other than io.EOF are *net.OpError values.
type Conn struct {
	link          *link
	in, out       *pipe // what this end reads, what it writes
	local, remote Addr
	rmu, wmu      sync.Mutex // one Read, one Write at a time
	rdl, wdl      deadline
	closed        atomic.Bool
}

func newConn(l *link, in, out *pipe, local, remote Addr) *Conn {
	c := &Conn{link: l, in: in, out: out, local: local, remote: remote}
	c.rdl.init()
	c.wdl.init()
	return c
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: NetworkName, Source: c.local, Addr: c.remote, Err: err}
}

// Read reads what the peer wrote.
func (c *Conn) Read(b []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	n, err := c.in.read(b, &c.rdl)
	if err != nil && err != io.EOF {
		err = c.opErr("read", err)
	}
	return n, err
}

// Write writes p for the peer to read.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, err := c.out.write(p, &c.wdl)
	if err != nil {
		err = c.opErr("write", err)
	}
	return n, err
}

// Close closes this end; the peer reads what this end wrote, then io.EOF.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return c.opErr("close", net.ErrClosed)
	}
	c.in.closeReader(net.ErrClosed)
	c.out.closeWriter(net.ErrClosed)
	if c.link.closed.Add(1) == 2 && c.link.from != c.link.to {
		c.link.n.untrack(c.link)
	}
	return nil
}

// CloseWrite shuts down the writing side: the peer reads what was written,
// then io.EOF; this end's Writes fail with syscall.EPIPE, its Reads go on.
func (c *Conn) CloseWrite() error {
	if c.closed.Load() {
		return c.opErr("close", net.ErrClosed)
	}
	c.out.closeWriter(syscall.EPIPE)
	return nil
}

// CloseRead shuts down the reading side: this end's Reads return io.EOF,
// what the peer wrote and writes is dropped, and its Writes fail with
// syscall.EPIPE.
func (c *Conn) CloseRead() error {
	if c.closed.Load() {
		return c.opErr("close", net.ErrClosed)
	}
	c.in.closeReader(io.EOF)
	return nil
}

// LocalAddr is this end's address: the listener's on the accepting end,
// "host:port" with a port of the network's choosing on the dialing end.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read and the write deadline.
func (c *Conn) SetDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opErr("set", net.ErrClosed)
	}
	// The write deadline first: a Read the read deadline wakes, and
	// whatever its goroutine does next, then finds both set (as one call
	// sets both on a real connection).
	c.wdl.set(t)
	c.rdl.set(t)
	return nil
}

// SetReadDeadline sets the read deadline.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opErr("set", net.ErrClosed)
	}
	c.rdl.set(t)
	return nil
}

// SetWriteDeadline sets the write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opErr("set", net.ErrClosed)
	}
	c.wdl.set(t)
	return nil
}

// pipe is one direction of a connection: a bounded buffer between one
// end's writes and the other end's reads.
type pipe struct {
	mu  sync.Mutex
	buf []byte // buf[off:] is unread
	off int
	// rerr: the reading end shut; its reads return rerr, writes fail
	// with EPIPE. werr: the writing end shut; its writes return werr,
	// reads drain the buffer, then return io.EOF. broken: reset.
	rerr, werr error
	broken     bool
	// readable and writable wake the one waiting reader and writer (the
	// ends serialize their reads and writes): a token means "look again".
	readable, writable chan struct{}
}

func newPipe() *pipe {
	return &pipe{readable: make(chan struct{}, 1), writable: make(chan struct{}, 1)}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// shrinkAbove is the capacity beyond which an emptied buffer is let go
// rather than kept for the next writes.
const shrinkAbove = 64 << 10

func (p *pipe) read(b []byte, dl *deadline) (int, error) {
	for {
		p.mu.Lock()
		var err error
		switch {
		case p.rerr != nil:
			err = p.rerr
		case p.broken:
			err = syscall.ECONNRESET
		case dl.expired():
			err = os.ErrDeadlineExceeded
		case len(b) == 0:
			p.mu.Unlock()
			return 0, nil
		case p.off < len(p.buf):
			n := copy(b, p.buf[p.off:])
			p.off += n
			if p.off == len(p.buf) {
				p.off = 0
				p.buf = p.buf[:0]
				if cap(p.buf) > shrinkAbove {
					p.buf = nil
				}
			}
			p.mu.Unlock()
			wake(p.writable)
			return n, nil
		case p.werr != nil:
			err = io.EOF
		}
		p.mu.Unlock()
		if err != nil {
			return 0, err
		}
		select {
		case <-p.readable:
		case <-dl.done():
		}
	}
}

func (p *pipe) write(b []byte, dl *deadline) (int, error) {
	n := 0
	for {
		p.mu.Lock()
		var err error
		switch {
		case p.werr != nil:
			err = p.werr
		case p.broken:
			err = syscall.ECONNRESET
		case p.rerr != nil:
			err = syscall.EPIPE
		case dl.expired():
			err = os.ErrDeadlineExceeded
		}
		if err != nil {
			p.mu.Unlock()
			return n, err
		}
		if len(b) == 0 {
			p.mu.Unlock()
			return 0, nil
		}
		used := len(p.buf) - p.off
		if chunk := min(len(b)-n, BufferSize-used); chunk > 0 {
			if p.off > 0 && cap(p.buf)-len(p.buf) < chunk {
				copy(p.buf, p.buf[p.off:])
				p.buf = p.buf[:used]
				p.off = 0
			}
			p.buf = append(p.buf, b[n:n+chunk]...)
			n += chunk
			p.mu.Unlock()
			wake(p.readable)
			if n == len(b) {
				return n, nil // even if the reader closes at once
			}
			continue
		}
		p.mu.Unlock()
		select {
		case <-p.writable:
		case <-dl.done():
		}
	}
}

func (p *pipe) closeReader(err error) {
	p.mu.Lock()
	p.rerr = err
	p.buf, p.off = nil, 0
	p.mu.Unlock()
	wake(p.readable)
	wake(p.writable)
}

func (p *pipe) closeWriter(err error) {
	p.mu.Lock()
	p.werr = err
	p.mu.Unlock()
	wake(p.readable)
	wake(p.writable)
}

func (p *pipe) reset() {
	p.mu.Lock()
	p.broken = true
	p.buf, p.off = nil, 0
	p.mu.Unlock()
	wake(p.readable)
	wake(p.writable)
}

// deadline is one end's read or write deadline: ch is closed once it
// passed. A new deadline replaces ch only if it was closed, so a call that
// waits on ch sees a deadline set while it waits.
type deadline struct {
	mu      sync.Mutex
	ch      chan struct{}
	passed  bool
	timer   *time.Timer
	version uint64 // of the latest set: a stale timer does nothing
}

func (d *deadline) init() { d.ch = make(chan struct{}) }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.version++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.passed {
		d.ch = make(chan struct{})
		d.passed = false
	}
	if t.IsZero() {
		return
	}
	wait := time.Until(t)
	if wait <= 0 {
		d.expireLocked()
		return
	}
	v := d.version
	d.timer = time.AfterFunc(wait, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.version == v {
			d.expireLocked()
		}
	})
}

func (d *deadline) expireLocked() {
	if !d.passed {
		d.passed = true
		close(d.ch)
	}
}

func (d *deadline) expired() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.passed
}

func (d *deadline) done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}
