package compat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A minimal ZooKeeper client written from the protocol (jute records as
// ZooKeeper's zookeeper.jute defines them), independent of coord's zk
// package, for what go-zookeeper v1.0.4 cannot send: addWatch, getEphemerals,
// getAllChildrenNumber, whoAmI, multiRead, checkWatches/removeWatches,
// create2, single ops with bad paths, and malformed input.

// Op codes (ZooDefs.OpCode) and error codes (KeeperException.Code).
const (
	opCreate               = 1
	opDelete               = 2
	opExists               = 3
	opGetData              = 4
	opSetData              = 5
	opGetChildren          = 8
	opPing                 = 11
	opCreate2              = 15
	opCheckWatches         = 17
	opRemoveWatches        = 18
	opMultiRead            = 22
	opSetWatches2          = 105
	opGetEphemerals        = 103
	opGetAllChildrenNumber = 104
	opAddWatch             = 106
	opCloseSession         = -11

	codeOK           = 0
	codeUnimplement  = -6
	codeBadArguments = -8
	codeNoNode       = -101
	codeNodeExists   = -110
	codeNoWatcher    = -121

	eventNodeCreated         = 1
	eventNodeDeleted         = 2
	eventNodeDataChanged     = 3
	eventNodeChildrenChanged = 4
)

// jw writes jute.
type jw struct{ b []byte }

func (w *jw) int(v int32)  { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *jw) long(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }
func (w *jw) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}
func (w *jw) buf(v []byte) {
	if v == nil {
		w.int(-1)
		return
	}
	w.int(int32(len(v)))
	w.b = append(w.b, v...)
}
func (w *jw) str(s string) { w.buf([]byte(s)) }
func (w *jw) strs(v []string) {
	w.int(int32(len(v)))
	for _, s := range v {
		w.str(s)
	}
}

// openACL is world:anyone with every permission.
func (w *jw) openACL() {
	w.int(1)
	w.int(31)
	w.str("world")
	w.str("anyone")
}

// jr reads jute; the first error sticks.
type jr struct {
	b   []byte
	err error
}

func (r *jr) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("jute: want %d bytes, have %d", n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}
func (r *jr) int() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}
func (r *jr) long() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}
func (r *jr) bool() bool {
	b := r.take(1)
	return b != nil && b[0] != 0
}
func (r *jr) buf() []byte {
	n := r.int()
	if n == -1 {
		return nil
	}
	return append([]byte{}, r.take(int(n))...)
}
func (r *jr) str() string { return string(r.buf()) }
func (r *jr) strs() []string {
	n := r.int()
	var out []string
	for i := int32(0); i < n && r.err == nil; i++ {
		out = append(out, r.str())
	}
	return out
}

type rawStat struct {
	Czxid, Mzxid, Ctime, Mtime  int64
	Version, Cversion, Aversion int32
	EphemeralOwner              int64
	DataLength, NumChildren     int32
	Pzxid                       int64
}

func (r *jr) stat() rawStat {
	return rawStat{r.long(), r.long(), r.long(), r.long(), r.int(), r.int(), r.int(), r.long(), r.int(), r.int(), r.long()}
}

type rawReply struct {
	xid  int32
	zxid int64
	err  int32
	body []byte
}

type rawEvent struct {
	typ, state int32
	path       string
}

// rawConn is one session over a raw connection. Replies and events are
// read by one goroutine; requests are sent one at a time by the test.
type rawConn struct {
	t         testing.TB
	nc        net.Conn
	wmu       sync.Mutex
	xid       int32
	SessionID int64
	Passwd    []byte
	Timeout   int32
	replies   chan rawReply
	closed    chan struct{} // the server closed the connection
	lastZxid  atomic.Int64  // the highest zxid of a reply, as clients track it

	emu    sync.Mutex
	events []rawEvent
}

type rawConnectOpts struct {
	sessionID int64
	passwd    []byte
	timeoutMs int32
	lastZxid  int64
}

// rawConnect performs the handshake. It returns the connection and the
// session the server granted (SessionID 0 when it refused).
func rawConnect(t testing.TB, addr string, o rawConnectOpts) *rawConn {
	t.Helper()
	nc := rawDial(t, addr, o)
	c := &rawConn{t: t, nc: nc, replies: make(chan rawReply, 100), closed: make(chan struct{})}
	nc.SetReadDeadline(time.Now().Add(wait))
	frame, err := readFrame(nc)
	if err != nil {
		t.Fatalf("raw connect: %v", err)
	}
	nc.SetReadDeadline(time.Time{})
	r := jr{b: frame}
	r.int() // protocolVersion
	c.Timeout = r.int()
	c.SessionID = r.long()
	c.Passwd = r.buf()
	if r.err != nil {
		t.Fatalf("raw connect response: %v", r.err)
	}
	go c.readLoop()
	if c.SessionID != 0 {
		go c.pingLoop()
	}
	return c
}

// rawDial connects and sends a ConnectRequest, and leaves the reply unread.
func rawDial(t testing.TB, addr string, o rawConnectOpts) net.Conn {
	t.Helper()
	if o.timeoutMs == 0 {
		o.timeoutMs = 10000
	}
	if o.passwd == nil {
		o.passwd = make([]byte, 16)
	}
	nc, err := dialPlain(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	var w jw
	w.int(0) // protocolVersion
	w.long(o.lastZxid)
	w.int(o.timeoutMs)
	w.long(o.sessionID)
	w.buf(o.passwd)
	w.bool(false) // readOnly
	if _, err := nc.Write(binary.BigEndian.AppendUint32(nil, uint32(len(w.b)))); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(w.b); err != nil {
		t.Fatal(err)
	}
	return nc
}

func dialPlain(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) }

func readFrame(rd io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(rd, n[:]); err != nil {
		return nil, err
	}
	l := binary.BigEndian.Uint32(n[:])
	if l > 16<<20 {
		return nil, fmt.Errorf("frame of %d bytes", l)
	}
	b := make([]byte, l)
	_, err := io.ReadFull(rd, b)
	return b, err
}

func (c *rawConn) writeFrame(body []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	_, err := c.nc.Write(append(frame, body...))
	return err
}

func (c *rawConn) readLoop() {
	defer close(c.closed)
	for {
		frame, err := readFrame(c.nc)
		if err != nil {
			return
		}
		r := jr{b: frame}
		rep := rawReply{xid: r.int(), zxid: r.long(), err: r.int()}
		rep.body = r.b
		switch rep.xid {
		case -2: // ping
		case -1:
			ev := rawEvent{typ: r.int(), state: r.int(), path: r.str()}
			c.emu.Lock()
			c.events = append(c.events, ev)
			c.emu.Unlock()
		default:
			if rep.zxid > c.lastZxid.Load() {
				c.lastZxid.Store(rep.zxid)
			}
			c.replies <- rep
		}
	}
}

func (c *rawConn) pingLoop() {
	tick := time.NewTicker(time.Duration(c.Timeout) * time.Millisecond / 3)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			var w jw
			w.int(-2)
			w.int(opPing)
			if c.writeFrame(w.b) != nil {
				return
			}
		case <-c.closed:
			return
		}
	}
}

// call sends one request and waits for its reply.
func (c *rawConn) call(op int32, body func(*jw)) rawReply {
	c.t.Helper()
	c.xid++
	var w jw
	w.int(c.xid)
	w.int(op)
	if body != nil {
		body(&w)
	}
	if err := c.writeFrame(w.b); err != nil {
		c.t.Fatalf("raw op %d: %v", op, err)
	}
	check := func(rep rawReply) rawReply {
		if rep.xid != c.xid {
			c.t.Fatalf("raw op %d: reply xid %d, want %d", op, rep.xid, c.xid)
		}
		return rep
	}
	select {
	case rep := <-c.replies:
		return check(rep)
	case <-c.closed:
		// readLoop queued every reply it read before it closed closed: a
		// reply and the close that follows it (closeSession) can both be
		// ready here, and select picks either.
		select {
		case rep := <-c.replies:
			return check(rep)
		default:
		}
		c.t.Fatalf("raw op %d: the server closed the connection", op)
	case <-time.After(wait):
		c.t.Fatalf("raw op %d: no reply within %v", op, wait)
	}
	return rawReply{}
}

// callErr sends one request and returns its error code.
func (c *rawConn) callErr(op int32, body func(*jw)) int32 { return c.call(op, body).err }

func (c *rawConn) eventsNow() []rawEvent {
	c.emu.Lock()
	defer c.emu.Unlock()
	return append([]rawEvent(nil), c.events...)
}

// barrier: one round trip, after which earlier events have arrived.
func (c *rawConn) barrier() {
	c.t.Helper()
	if e := c.callErr(opExists, func(w *jw) { w.str("/"); w.bool(false) }); e != codeOK {
		c.t.Fatalf("raw exists /: %d", e)
	}
}

func (c *rawConn) create(path string, flags int32) int32 {
	return c.callErr(opCreate, func(w *jw) { w.str(path); w.buf(nil); w.openACL(); w.int(flags) })
}

func (c *rawConn) mustCreate(path string, flags int32) {
	c.t.Helper()
	if e := c.create(path, flags); e != codeOK {
		c.t.Fatalf("raw create %s: error %d", path, e)
	}
}

func (c *rawConn) setData(path, data string) int32 {
	return c.callErr(opSetData, func(w *jw) { w.str(path); w.buf([]byte(data)); w.int(-1) })
}

func (c *rawConn) delete(path string) int32 {
	return c.callErr(opDelete, func(w *jw) { w.str(path); w.int(-1) })
}

func (c *rawConn) addWatch(path string, mode int32) int32 {
	return c.callErr(opAddWatch, func(w *jw) { w.str(path); w.int(mode) })
}

// closeSession ends the session and waits for the server to close.
func (c *rawConn) closeSession() {
	c.t.Helper()
	if e := c.callErr(opCloseSession, nil); e != codeOK {
		c.t.Errorf("closeSession: %d", e)
	}
	select {
	case <-c.closed:
	case <-time.After(wait):
		c.t.Error("the server kept the connection after closeSession")
	}
}

var errClosedByServer = errors.New("closed by the server")

// readUntilClosed reads until the server closes the connection (or d
// passes) and returns what it read.
func readUntilClosed(nc net.Conn, d time.Duration) ([]byte, error) {
	nc.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(nc)
	if err == nil {
		err = errClosedByServer
	}
	return b, err
}
