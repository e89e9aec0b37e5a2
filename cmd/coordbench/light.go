package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"coord/vocab"
	"coord/zk"
)

// lightConn is one ZooKeeper-protocol session kept as small as the wire
// allows, for -scale's 100,000 sessions in one process: go-zookeeper
// gives every connection a 1.5 MB buffer and four goroutines, which is
// 150 GB for 100,000. A lightConn has one goroutine (its reader), makes
// one request at a time, and leaves pings to the scale's pinger. It
// speaks the protocol as the Java client does: a ConnectRequest with the
// readOnly byte, pings (xid -2), and after a reconnect the session id,
// password and last zxid, then SetWatches2 (xid -8) with the watches it
// holds. Both coord's ZooKeeper port and Apache ZooKeeper serve it.
type lightConn struct {
	id      int
	addrs   []string // every server; the session starts at addrs[srv]
	timeout time.Duration
	hooks   *lightHooks

	callMu  sync.Mutex // one request at a time
	wmu     sync.Mutex // one frame written at a time
	replies chan lightReply

	mu        sync.Mutex // guards c, srv, xid, the watch lists and the flags
	c         net.Conn
	srv       int
	sid       int64
	passwd    []byte
	xid       int32
	dropped   bool // dropped on purpose: no reconnect
	expired   bool
	connected bool
	// The one-shot watches this session holds, by kind, and its
	// persistent-recursive ones, re-registered after a reconnect. A
	// one-shot watch that fired is taken off by the event handler.
	dataW, existW, childW, recursiveW []string

	lastZxid atomic.Int64
}

type lightReply struct {
	hdr  zk.ReplyHeader
	body []byte
}

// lightHooks are what a scale phase wants to hear of; each may be nil.
// They run on the connection's reader goroutine.
type lightHooks struct {
	event       atomic.Pointer[func(lc *lightConn, ev zk.WatcherEvent, at time.Time)]
	disconnect  atomic.Pointer[func(lc *lightConn, at time.Time)]
	reconnected atomic.Pointer[func(lc *lightConn, at time.Time, expired bool, err error)]
	// attempt hears of each try to get a session back: how it ended
	// (attemptKind) and how long the handshake took, the wait before it
	// not counted.
	attempt atomic.Pointer[func(lc *lightConn, kind string, took time.Duration)]
}

// attemptKind names how one reconnect try ended: "ok", "expired", "dial"
// (no connection), "timeout" (no answer within the connect timeout),
// "closed" (the server closed the connection: refused), or "setwatches".
func attemptKind(err error) string {
	var ne net.Error
	var oe *net.OpError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, errLightExpired):
		return "expired"
	case errors.As(err, &oe) && oe.Op == "dial":
		return "dial"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "closed"
	}
}

// errLightExpired: the server said the session is gone.
var errLightExpired = errors.New("session expired")

// lightDialTimeout bounds a dial and a handshake (and sessionTimeout /
// servers, as the Java client's connect timeout).
const lightDialTimeout = 5 * time.Second

// localAddrFor spreads connections over 127.0.0.2–127.0.0.251 as their
// source address: one source address has fewer than 30,000 ephemeral
// ports to a server's port.
func localAddrFor(id int) *net.TCPAddr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+id%250))}
}

// dialLight opens a new session on addrs[srv].
func dialLight(ctx context.Context, id int, addrs []string, srv int, timeout time.Duration, hooks *lightHooks) (*lightConn, error) {
	lc := &lightConn{id: id, addrs: addrs, srv: srv, timeout: timeout, hooks: hooks, replies: make(chan lightReply, 1)}
	c, err := lc.handshake(ctx, addrs[srv])
	if err != nil {
		return nil, err
	}
	lc.c = c
	lc.connected = true
	go lc.read(c)
	return lc, nil
}

// handshake dials addr and asks for a new session, or for this one back.
func (lc *lightConn) handshake(ctx context.Context, addr string) (net.Conn, error) {
	wait := min(lightDialTimeout, lc.timeout/time.Duration(len(lc.addrs)))
	d := net.Dialer{Timeout: wait}
	if ip := net.ParseIP(hostOf(addr)); ip != nil && ip.IsLoopback() {
		d.LocalAddr = localAddrFor(lc.id)
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	lc.mu.Lock()
	req := zk.ConnectRequest{LastZxidSeen: lc.lastZxid.Load(), TimeOut: int32(lc.timeout.Milliseconds()),
		SessionID: lc.sid, Passwd: lc.passwd, HasReadOnly: true}
	lc.mu.Unlock()
	if req.Passwd == nil {
		req.Passwd = make([]byte, zk.PasswordLen)
	}
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write(zk.AppendFrame(nil, &req)); err != nil {
		c.Close()
		return nil, err
	}
	body, err := zk.ReadFrame(c, zk.DefaultMaxFrame)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	var resp zk.ConnectResponse
	if err := zk.Unmarshal(body, &resp); err != nil {
		c.Close()
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	c.SetDeadline(time.Time{})
	if resp.TimeOut <= 0 {
		c.Close()
		return nil, errLightExpired
	}
	lc.mu.Lock()
	lc.sid, lc.passwd = resp.SessionID, resp.Passwd
	lc.mu.Unlock()
	return c, nil
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// read reads c until it fails; then, unless the session was dropped, it
// reconnects to the next servers in turn and re-registers the watches.
func (lc *lightConn) read(c net.Conn) {
	for {
		lc.readUntilError(c)
		lc.mu.Lock()
		lc.connected = false
		stop := lc.dropped
		lc.mu.Unlock()
		if stop {
			return
		}
		if h := lc.hooks.disconnect.Load(); h != nil {
			(*h)(lc, time.Now())
		}
		var err error
		if c, err = lc.reconnect(); err != nil {
			lc.mu.Lock()
			lc.expired = errors.Is(err, errLightExpired)
			lc.mu.Unlock()
			if h := lc.hooks.reconnected.Load(); h != nil {
				(*h)(lc, time.Now(), errors.Is(err, errLightExpired), err)
			}
			return
		}
	}
}

func (lc *lightConn) readUntilError(c net.Conn) {
	for {
		body, err := zk.ReadFrame(c, zk.DefaultMaxFrame)
		if err != nil {
			c.Close()
			return
		}
		hdr, rest, ok := lc.handle(body)
		if !ok {
			c.Close()
			return
		}
		if hdr.Xid == zk.XidPing || hdr.Xid == zk.XidNotification {
			continue
		}
		select {
		case lc.replies <- lightReply{hdr: hdr, body: rest}:
		default: // nobody waits any more
		}
	}
}

// handle decodes a frame's header, takes in an event (ok false: not a
// frame of the protocol) and returns the header and what follows it.
func (lc *lightConn) handle(body []byte) (zk.ReplyHeader, []byte, bool) {
	d := zk.NewDecoder(body)
	var hdr zk.ReplyHeader
	if hdr.Decode(d) != nil {
		return hdr, nil, false
	}
	switch hdr.Xid {
	case zk.XidPing:
	case zk.XidNotification:
		var ev zk.WatcherEvent
		if ev.Decode(d) != nil {
			return hdr, nil, false
		}
		lc.fired(ev)
		if h := lc.hooks.event.Load(); h != nil {
			(*h)(lc, ev, time.Now())
		}
	default:
		if hdr.Zxid > lc.lastZxid.Load() {
			lc.lastZxid.Store(hdr.Zxid)
		}
	}
	return hdr, body[d.Offset():], true
}

// fired takes a one-shot watch that fired off the lists (a
// NodeDeleted/NodeDataChanged/NodeCreated event spends the data and exist
// watch of its path, NodeChildrenChanged the child watch).
func (lc *lightConn) fired(ev zk.WatcherEvent) {
	if ev.Type == zk.EventNone {
		return
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if ev.Type == zk.EventNodeChildrenChanged {
		lc.childW = without(lc.childW, ev.Path)
		return
	}
	lc.dataW = without(lc.dataW, ev.Path)
	lc.existW = without(lc.existW, ev.Path)
}

func without(list []string, p string) []string {
	for i, s := range list {
		if s == p {
			list[i] = list[len(list)-1]
			return list[:len(list)-1]
		}
	}
	return list
}

// reconnect tries the other servers in a random order, as the Java
// client does: before each attempt it waits a random 0–1 s (so that a
// server's clients do not all come back in the same instant), and gives a
// server sessionTimeout/servers to answer. It goes on until a server takes
// the session back or says it expired, for at most lightReconnectFor.
func (lc *lightConn) reconnect() (net.Conn, error) {
	deadline := time.Now().Add(lightReconnectFor)
	for try := 1; time.Now().Before(deadline); try++ {
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		lc.mu.Lock()
		if lc.dropped {
			lc.mu.Unlock()
			return nil, errors.New("dropped")
		}
		// Another server, at random: clients shuffle their server list
		// (the Java client's StaticHostProvider), so a dead server's
		// sessions spread over the others rather than all trying the next.
		srv := (lc.srv + 1 + rand.IntN(max(1, len(lc.addrs)-1))) % len(lc.addrs)
		lc.mu.Unlock()
		began := time.Now()
		c, err := lc.handshake(context.Background(), lc.addrs[srv])
		if h := lc.hooks.attempt.Load(); h != nil {
			(*h)(lc, attemptKind(err), time.Since(began))
		}
		if errors.Is(err, errLightExpired) {
			return nil, err
		}
		if err != nil {
			continue
		}
		lc.mu.Lock()
		lc.c, lc.srv, lc.connected = c, srv, true
		sw := &zk.SetWatches2{RelativeZxid: lc.lastZxid.Load(), DataWatches: lc.dataW, ExistWatches: lc.existW,
			ChildWatches: lc.childW, PersistentRecursiveWatches: lc.recursiveW}
		lc.mu.Unlock()
		if err := lc.setWatches(c, sw); err != nil {
			c.Close()
			if h := lc.hooks.attempt.Load(); h != nil {
				(*h)(lc, "setwatches", time.Since(began))
			}
			continue
		}
		if h := lc.hooks.reconnected.Load(); h != nil {
			(*h)(lc, time.Now(), false, nil)
		}
		return c, nil
	}
	return nil, fmt.Errorf("session 0x%x: no server took it back within %v", lc.sid, lightReconnectFor)
}

// lightReconnectFor bounds a session's attempts to get back to a server.
const lightReconnectFor = 3 * time.Minute

// setWatches re-registers the session's watches on c, as a client does
// right after it reconnects, and reads c until the answer (events the
// server fires at once may come first).
func (lc *lightConn) setWatches(c net.Conn, sw *zk.SetWatches2) error {
	if len(sw.DataWatches)+len(sw.ExistWatches)+len(sw.ChildWatches)+len(sw.PersistentRecursiveWatches) == 0 {
		return nil
	}
	if err := lc.write(c, zk.XidSetWatches, zk.OpSetWatches2, sw); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	for {
		body, err := zk.ReadFrame(c, zk.DefaultMaxFrame)
		if err != nil {
			return err
		}
		hdr, _, ok := lc.handle(body)
		if !ok {
			return errors.New("setWatches: a frame that does not decode")
		}
		if hdr.Xid == zk.XidSetWatches {
			if hdr.Err != vocab.OK {
				return fmt.Errorf("setWatches: %v", hdr.Err)
			}
			return nil
		}
	}
}

// write sends one request frame on c.
func (lc *lightConn) write(c net.Conn, xid int32, op zk.OpCode, req zk.Record) error {
	recs := []zk.Record{&zk.RequestHeader{Xid: xid, Type: op}}
	if req != nil {
		recs = append(recs, req)
	}
	frame := zk.AppendFrame(nil, recs...)
	lc.wmu.Lock()
	defer lc.wmu.Unlock()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Write(frame)
	return err
}

// call makes one request and waits, at most wait, for its answer.
func (lc *lightConn) call(op zk.OpCode, req zk.Record, wait time.Duration) (lightReply, error) {
	lc.callMu.Lock()
	defer lc.callMu.Unlock()
	lc.mu.Lock()
	lc.xid++
	xid, c, ok := lc.xid, lc.c, lc.connected
	lc.mu.Unlock()
	if !ok {
		return lightReply{}, errors.New("not connected")
	}
	for len(lc.replies) > 0 { // an answer nobody waited for
		<-lc.replies
	}
	if err := lc.write(c, xid, op, req); err != nil {
		return lightReply{}, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case r := <-lc.replies:
			if r.hdr.Xid != xid {
				continue
			}
			if r.hdr.Err != vocab.OK {
				return r, r.hdr.Err
			}
			return r, nil
		case <-t.C:
			return lightReply{}, fmt.Errorf("%v: no answer within %v", op, wait)
		}
	}
}

// ping sends a ping (the answer is read and dropped by the reader).
func (lc *lightConn) ping() {
	lc.mu.Lock()
	c, ok := lc.c, lc.connected
	lc.mu.Unlock()
	if ok {
		lc.write(c, zk.XidPing, zk.OpPing, nil)
	}
}

// drop closes the connection without closing the session, as a client
// whose machine vanished: the session expires after its timeout.
func (lc *lightConn) drop() {
	lc.mu.Lock()
	lc.dropped = true
	c := lc.c
	lc.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// bounce closes the connection and keeps the session: the reader takes it
// to another server (reconnect), as when its server goes away.
func (lc *lightConn) bounce() {
	lc.mu.Lock()
	c := lc.c
	lc.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// state reports whether the session is connected now and whether it
// expired.
func (lc *lightConn) state() (connected, expired bool) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.connected, lc.expired
}

// server is the index of the server the session is on (last connected).
func (lc *lightConn) server() int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.srv
}

// The requests -scale makes. Each records the watch it leaves so that a
// reconnect re-registers it.

// lightCallWait bounds one request of -scale.
const lightCallWait = 30 * time.Second

func (lc *lightConn) create(path string, data []byte, mode vocab.CreateMode) error {
	_, err := lc.call(zk.OpCreate, &zk.CreateRequest{Path: path, Data: data, ACL: vocab.OpenACLUnsafe, Flags: mode}, lightCallWait)
	return err
}

func (lc *lightConn) setData(path string, data []byte) error {
	_, err := lc.call(zk.OpSetData, &zk.SetDataRequest{Path: path, Data: data, Version: -1}, lightCallWait)
	return err
}

// getDataW reads path and leaves a data watch.
func (lc *lightConn) getDataW(path string) error {
	return lc.watch(zk.OpGetData, &zk.GetDataRequest{Path: path, Watch: true}, &lc.dataW, path)
}

// childrenW lists path's children and leaves a child watch.
func (lc *lightConn) childrenW(path string) error {
	return lc.watch(zk.OpGetChildren, &zk.GetChildrenRequest{Path: path, Watch: true}, &lc.childW, path)
}

// addWatchRecursive leaves a persistent-recursive watch on path.
func (lc *lightConn) addWatchRecursive(path string) error {
	return lc.watch(zk.OpAddWatch, &zk.AddWatchRequest{Path: path, Mode: vocab.AddWatchPersistentRecursive}, &lc.recursiveW, path)
}

// existsW leaves an exist watch on path (which may not exist: NoNode
// still leaves the watch, as on ZooKeeper; on an existing node it is a
// data watch).
func (lc *lightConn) existsW(path string) error {
	_, err := lc.call(zk.OpExists, &zk.ExistsRequest{Path: path, Watch: true}, lightCallWait)
	switch {
	case errors.Is(err, vocab.NoNode):
		lc.note(&lc.existW, path)
	case err == nil:
		lc.note(&lc.dataW, path)
	default:
		return err
	}
	return nil
}

// watch makes a request that leaves a watch and, once it succeeded, notes
// the watch in list.
func (lc *lightConn) watch(op zk.OpCode, req zk.Record, list *[]string, path string) error {
	if _, err := lc.call(op, req, lightCallWait); err != nil {
		return err
	}
	lc.note(list, path)
	return nil
}

func (lc *lightConn) note(list *[]string, path string) {
	lc.mu.Lock()
	*list = append(*list, path)
	lc.mu.Unlock()
}

// watchCount is how many watches the session holds now.
func (lc *lightConn) watchCount() int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return len(lc.dataW) + len(lc.existW) + len(lc.childW) + len(lc.recursiveW)
}
