package server

import (
	"bufio"
	"errors"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"coord/api"
	"coord/vocab"
	"coord/zk"
)

// Issue 14: one client must never take a server down.

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// waitThrottled waits until s stops reading a flooding connection, lets
// what is still moving settle, and returns how far the heap grew since
// before.
func waitThrottled(t *testing.T, s *Server, before uint64) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(s.metrics.throttled) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the server never stopped reading the flooding connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	return int64(heapInUse()) - int64(before)
}

// A session that pipelines requests and never reads the replies makes the
// server stop reading it once its queue is full, instead of reading on and
// holding every reply (about 800 B each before): the server's heap stays
// bounded, other sessions are served, and the session gets every reply,
// in order, once it reads.
func TestUnreadRepliesAreBounded(t *testing.T) {
	c := NewTestCluster(t, 1, 0)
	s := c.Servers[0]
	setup := newSession(t, s.GRPCAddr())
	mustOK(t, setup.create("/small", "0123456789", vocab.ModePersistent))

	before := heapInUse()
	r := dialZK(t, s.ZKAddr())
	r.nc.SetDeadline(time.Time{})
	r.connect(zk.ConnectRequest{TimeOut: 20000})
	const n = 300_000
	var frames []byte
	for i := 1; i <= n; i++ {
		frames = zk.AppendFrame(frames, &zk.RequestHeader{Xid: int32(i), Type: zk.OpGetData}, &zk.GetDataRequest{Path: "/small"})
	}
	// Write until the kernel's buffers are full too (or all is written).
	written := 0
	for written < len(frames) {
		r.nc.SetWriteDeadline(time.Now().Add(time.Second))
		k, err := r.nc.Write(frames[written:min(written+64<<10, len(frames))])
		written += k
		if err != nil {
			break
		}
	}
	grown := waitThrottled(t, s, before)
	t.Logf("heap grew by %.1f MiB with %d of %d requests written and their replies unread", float64(grown)/(1<<20), written/(len(frames)/n), n)
	if grown > 48<<20 {
		t.Errorf("the server's heap grew by %d MiB while a client did not read its replies; want it bounded (< 48 MiB)", grown>>20)
	}
	if testutil.ToFloat64(s.metrics.throttles) < 1 {
		t.Error("coord_server_connection_throttles_total did not count the throttle")
	}

	// Others are served meanwhile.
	other := newSession(t, s.GRPCAddr())
	mustOK(t, other.create("/other", "", vocab.ModePersistent))

	// The flooding session gets every reply, in order, when it reads (and
	// writes the rest of its requests meanwhile).
	go func() {
		r.nc.SetWriteDeadline(time.Time{})
		r.nc.Write(frames[written:])
	}()
	r.nc.SetReadDeadline(time.Now().Add(120 * time.Second))
	br := bufio.NewReaderSize(r.nc, 1<<20)
	for i := 1; i <= n; i++ {
		frame, err := zk.ReadFrame(br, zk.DefaultMaxFrame)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		var h zk.ReplyHeader
		if err := h.Decode(zk.NewDecoder(frame)); err != nil || h.Xid != int32(i) || h.Err != vocab.OK {
			t.Fatalf("reply %d: xid %d err %v (%v)", i, h.Xid, h.Err, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(s.metrics.throttled) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := testutil.ToFloat64(s.metrics.throttled); g != 0 {
		t.Errorf("coord_server_throttled_connections = %v after the client read everything", g)
	}
}

// The same over gRPC: a session stream whose client sends requests and
// never receives stops being read (gRPC's flow control then stops the
// client's sends), with the server's heap bounded, and gets every reply
// once it reads.
func TestUnreadRepliesAreBoundedOverGRPC(t *testing.T) {
	c := NewTestCluster(t, 1, 0)
	s := c.Servers[0]
	setup := newSession(t, s.GRPCAddr())
	mustOK(t, setup.create("/small", "0123456789", vocab.ModePersistent))
	before := heapInUse()
	rs := newSession(t, s.GRPCAddr())
	const n = 100_000
	sent := 0
	sendDone := make(chan struct{})
	go func() {
		defer close(sendDone)
		for i := 1; i <= n; i++ {
			err := rs.stream.Send(&api.ClientMessage{Msg: &api.ClientMessage_Request{Request: &api.Request{Xid: int64(i),
				Op: &api.Request_GetData{GetData: &api.GetDataRequest{Path: "/small"}}}}})
			if err != nil {
				return
			}
			sent = i
		}
	}()
	grown := waitThrottled(t, s, before)
	t.Logf("heap grew by %.1f MiB with a gRPC session's replies unread", float64(grown)/(1<<20))
	if grown > 48<<20 {
		t.Errorf("the server's heap grew by %d MiB while a gRPC client did not read its replies", grown>>20)
	}
	for i := int64(1); i <= n; i++ {
		msg, err := rs.recvMsg(60 * time.Second)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if r := msg.GetResponse(); r == nil || r.Xid != i || r.Err != 0 {
			t.Fatalf("reply %d: %v", i, msg)
		}
	}
	<-sendDone
	if sent != n {
		t.Fatalf("sent %d of %d", sent, n)
	}
}

// Running out of file descriptors makes accepts fail for a while; the
// ZooKeeper listener retries and accepts again once descriptors are free.
func TestZooKeeperListenerSurvivesDescriptorExhaustion(t *testing.T) {
	c := NewTestCluster(t, 1, 0)
	s := c.Servers[0]
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	open := countOpenFDs(t)
	low := old
	low.Cur = uint64(open + 200)
	if low.Cur > old.Cur {
		t.Skipf("descriptor limit %d is already below what the test needs", old.Cur)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	restore := func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) }
	defer restore()

	// Open connections until dialing runs out of descriptors: the client
	// and the server are one process, so the server's accepts fail too.
	var conns []net.Conn
	for i := 0; i < 1000; i++ {
		nc, err := net.DialTimeout("tcp", s.ZKAddr(), time.Second)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
				t.Logf("dial %d: %v", i, err)
			}
			break
		}
		conns = append(conns, nc)
	}
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(s.metrics.acceptErrors) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if testutil.ToFloat64(s.metrics.acceptErrors) == 0 {
		t.Fatalf("no accept failed with %d connections open and the limit at %d", len(conns), low.Cur)
	}
	t.Logf("%d connections open; %v accepts failed", len(conns), testutil.ToFloat64(s.metrics.acceptErrors))
	for _, nc := range conns {
		nc.Close()
	}
	restore()

	// Descriptors are free: a new client gets a session.
	time.Sleep(100 * time.Millisecond)
	deadline = time.Now().Add(10 * time.Second)
	for {
		nc, err := net.DialTimeout("tcp", s.ZKAddr(), time.Second)
		if err == nil {
			r := &rawZK{t: t, nc: nc, br: bufio.NewReader(nc)}
			t.Cleanup(func() { nc.Close() })
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			if resp := r.connect(zk.ConnectRequest{TimeOut: 10000}); resp.SessionID == 0 {
				t.Fatal("refused a session after descriptors were freed")
			}
			// gRPC's listener (grpc-go retries failed accepts too) takes
			// sessions again as well.
			if _, err := dialRetry(t, s.GRPCAddr(), nil); err != nil {
				t.Fatalf("no gRPC session after descriptors were freed: %v", err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ZooKeeper listener accepts nothing after descriptors were freed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func countOpenFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("counting open descriptors: %v", err)
	}
	return len(ents)
}

// One address may hold MaxClientConns client connections; one more is
// closed at once, as ZooKeeper's maxClientCnxns does, and counted.
// A connection that sends nothing is closed after HandshakeTimeout.
func TestPerAddressLimitAndHandshakeTimeout(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 1, 0, func(cfg *Config) {
		cfg.MaxClientConns = 5
		cfg.HandshakeTimeout = 300 * time.Millisecond
	})
	s := c.Servers[0]
	var held []*rawZK
	for i := 0; i < 5; i++ {
		r := dialZK(t, s.ZKAddr())
		if resp := r.connect(zk.ConnectRequest{TimeOut: 10000}); resp.SessionID == 0 {
			t.Fatalf("connection %d refused", i)
		}
		held = append(held, r)
	}
	extra := dialZK(t, s.ZKAddr())
	if !extra.closed() {
		t.Fatal("a sixth connection from one address was not closed")
	}
	// gRPC sessions count too.
	if _, err := dialSession(t, s.GRPCAddr(), nil); err == nil {
		t.Fatal("a gRPC session past the per-address limit was accepted")
	}
	if n := testutil.ToFloat64(s.metrics.connsRefused.WithLabelValues("per_address_limit")); n < 2 {
		t.Errorf("coord_server_connections_refused_total{reason=per_address_limit} = %v, want 2", n)
	}
	// One goes: there is room again.
	held[0].nc.Close()
	held[0] = connectOnceRoom(t, s)
	for _, r := range held {
		r.nc.Close()
	}

	// A connection that never sends its connect request is closed after
	// the handshake timeout, not held for a session timeout.
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	silent := dialZK(t, s.ZKAddr())
	silent.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.br.ReadByte(); err == nil {
		t.Fatal("the server sent something to a silent connection")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a silent connection was held %v; the handshake timeout is 300 ms", d)
	}
	if n := testutil.ToFloat64(s.metrics.connsRefused.WithLabelValues("handshake_timeout")); n < 1 {
		t.Errorf("coord_server_connections_refused_total{reason=handshake_timeout} = %v", n)
	}
}

// A server holds at most MaxClientTotal client connections from all
// addresses together (by default its open-file limit less a reserve for
// raft and its files): one more is closed at once, ZooKeeper protocol or
// gRPC, counted as total_limit, and a connection that goes makes room.
func TestTotalClientLimit(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 1, 0, func(cfg *Config) {
		cfg.MaxClientConns = 0
		cfg.MaxClientTotal = 3
	})
	s := c.Servers[0]
	var held []*rawZK
	for i := 0; i < 3; i++ {
		r := dialZK(t, s.ZKAddr())
		if resp := r.connect(zk.ConnectRequest{TimeOut: 10000}); resp.SessionID == 0 {
			t.Fatalf("connection %d refused", i)
		}
		held = append(held, r)
	}
	if extra := dialZK(t, s.ZKAddr()); !extra.closed() {
		t.Fatal("a fourth client connection was not closed")
	}
	if _, err := dialSession(t, s.GRPCAddr(), nil); err == nil {
		t.Fatal("a gRPC session past the total limit was accepted")
	}
	if n := testutil.ToFloat64(s.metrics.connsRefused.WithLabelValues("total_limit")); n < 2 {
		t.Errorf("coord_server_connections_refused_total{reason=total_limit} = %v, want 2", n)
	}
	held[0].nc.Close()
	held[0] = connectOnceRoom(t, s)
	for _, r := range held {
		r.nc.Close()
	}
}

// The default bound keeps a sixteenth of the open-file limit (at least
// 256) for what is not a client.
func TestClientConnsTotalKeepsAReserve(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		t.Skip("no open-file limit to read")
	}
	soft := int(lim.Cur)
	got := clientConnsTotal()
	if reserve := soft - got; got < 1 || (soft > 300 && reserve < 256) || reserve < soft/16 {
		t.Fatalf("open-file limit %d: client bound %d keeps %d back", soft, got, reserve)
	}
}

// connectOnceRoom opens a session on s, trying for 5 s while s closes each
// connection at once (a limit it is at).
func connectOnceRoom(t *testing.T, s *Server) *rawZK {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := dialZK(t, s.ZKAddr())
		r.nc.Write(zk.AppendFrame(nil, &zk.ConnectRequest{TimeOut: 10000}))
		if _, err := zk.ReadFrame(r.br, zk.DefaultMaxFrame); err == nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatal("no room after a connection closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
