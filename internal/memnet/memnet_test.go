package memnet_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"coord/internal/memnet"
)

// pair dials addr on the listener's network from host from and returns the
// dialer's end and the accepted end.
func pair(t *testing.T, from *memnet.Host, lis net.Listener) (dialed, accepted net.Conn) {
	t.Helper()
	got := make(chan net.Conn, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	c, err := from.Dial(context.Background(), lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a == nil {
		t.FailNow()
	}
	t.Cleanup(func() { c.Close(); a.Close() })
	return c, a
}

func listen(t *testing.T, h *memnet.Host, addr string) net.Listener {
	t.Helper()
	l, err := h.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func readFull(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read: %v", err)
	}
	return b
}

func TestEcho(t *testing.T) {
	n := memnet.New()
	s1, c := n.Host("s1"), n.Host("c")
	lis := listen(t, s1, "s1:7000")
	if a := lis.Addr(); a.Network() != "memnet" || a.String() != "s1:7000" {
		t.Fatalf("listener addr %s/%s", a.Network(), a)
	}
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				io.Copy(conn, conn)
			}()
		}
	}()
	conn, err := c.Dial(context.Background(), "s1:7000")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if conn.RemoteAddr().String() != "s1:7000" || conn.RemoteAddr().Network() != "memnet" {
		t.Errorf("remote addr %v", conn.RemoteAddr())
	}
	if la := conn.LocalAddr().String(); !strings.HasPrefix(la, "c:") || conn.LocalAddr().Network() != "memnet" {
		t.Errorf("local addr %v", la)
	}
	for _, msg := range []string{"hello", "", "world", strings.Repeat("x", 100000)} {
		if _, err := conn.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if got := readFull(t, conn, len(msg)); string(got) != msg {
			t.Fatalf("echo of %d bytes: got %d bytes that differ", len(msg), len(got))
		}
	}
}

func TestAddrs(t *testing.T) {
	n := memnet.New()
	s1, s2 := n.Host("s1"), n.Host("s2")
	l1 := listen(t, s1, "s1:0")
	l2 := listen(t, s1, "s1:0")
	if l1.Addr().String() == "s1:0" || l1.Addr().String() == l2.Addr().String() || !strings.HasPrefix(l1.Addr().String(), "s1:") {
		t.Fatalf("port 0 gave %s and %s", l1.Addr(), l2.Addr())
	}
	if a, ok := l1.Addr().(memnet.Addr); !ok || a.Host != "s1" {
		t.Fatalf("listener addr %#v", l1.Addr())
	}
	l3 := listen(t, s2, ":7000") // an empty host part is the host's name
	if l3.Addr().String() != "s2:7000" {
		t.Fatalf(":7000 on s2 listens on %s", l3.Addr())
	}
	if _, err := s1.Listen("s2:7000"); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second listen on s2:7000: %v, want address in use", err)
	}
	self, err := s2.Dial(context.Background(), ":7000") // so is it in a dial
	if err != nil || self.RemoteAddr().String() != "s2:7000" {
		t.Fatalf("dial :7000 on s2: %v", err)
	}
	self.Close()
	d, a := pair(t, s2, l1)
	if a.RemoteAddr().String() != d.LocalAddr().String() || a.LocalAddr().String() != l1.Addr().String() {
		t.Errorf("accepted %v <- %v, dialed %v -> %v", a.LocalAddr(), a.RemoteAddr(), d.LocalAddr(), d.RemoteAddr())
	}
	// Closing frees the address.
	l3.Close()
	if err := l3.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second close: %v", err)
	}
	if _, err := l3.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("accept after close: %v", err)
	}
	listen(t, s1, "s2:7000") // any host may take any free address
}

// TestManyConns runs 50 connections at once, each with both ends writing
// and reading 200 KB concurrently (more than fits in neither direction's
// buffer but more than one Write's worth).
func TestManyConns(t *testing.T) {
	n := memnet.New()
	lis := listen(t, n.Host("s1"), "s1:7000")
	const conns, size = 50, 200 << 10
	data := func(seed uint64) []byte {
		var key [32]byte
		key[0], key[1] = byte(seed), byte(seed>>8)
		b := make([]byte, size)
		rand.NewChaCha8(key).Read(b)
		return b
	}
	// exchange writes mine in random pieces while it reads and checks theirs.
	exchange := func(c net.Conn, mine, theirs []byte) error {
		errs := make(chan error, 1)
		go func() {
			r := rand.New(rand.NewPCG(uint64(len(mine)), 2))
			for off := 0; off < len(mine); {
				k := min(1+r.IntN(40000), len(mine)-off)
				if _, err := c.Write(mine[off : off+k]); err != nil {
					errs <- err
					return
				}
				off += k
			}
			errs <- nil
		}()
		got := make([]byte, len(theirs))
		if _, err := io.ReadFull(c, got); err != nil {
			return err
		}
		if !bytes.Equal(got, theirs) {
			return errors.New("data differ")
		}
		return <-errs
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range conns {
			c, err := lis.Accept()
			if err != nil {
				t.Error(err)
				return
			}
			wg.Go(func() {
				defer c.Close()
				var id [1]byte
				if _, err := io.ReadFull(c, id[:]); err != nil {
					t.Error(err)
					return
				}
				if err := exchange(c, data(uint64(id[0])+1000), data(uint64(id[0]))); err != nil {
					t.Errorf("server %d (%d): %v", i, id[0], err)
				}
			})
		}
	})
	for i := range conns {
		wg.Go(func() {
			c, err := n.Host("c").Dial(context.Background(), "s1:7000")
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.Write([]byte{byte(i)})
			if err := exchange(c, data(uint64(i)), data(uint64(i)+1000)); err != nil {
				t.Errorf("client %d: %v", i, err)
			}
		})
	}
	wg.Wait()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
}

func TestReadDeadline(t *testing.T) {
	n := memnet.New()
	d, a := pair(t, n.Host("c"), listen(t, n.Host("s1"), "s1:7000"))
	buf := make([]byte, 10)

	// It fires.
	start := time.Now()
	d.SetReadDeadline(start.Add(30 * time.Millisecond))
	if _, err := d.Read(buf); !isTimeout(err) {
		t.Fatalf("read past deadline: %v", err)
	}
	if el := time.Since(start); el < 25*time.Millisecond {
		t.Fatalf("deadline fired after %v", el)
	}
	// Still passed: the next Read fails at once, even with data there.
	a.Write([]byte("x"))
	if _, err := d.Read(buf); !isTimeout(err) {
		t.Fatalf("second read: %v", err)
	}
	// Removed: the data is read.
	d.SetReadDeadline(time.Time{})
	if k, err := d.Read(buf); err != nil || string(buf[:k]) != "x" {
		t.Fatalf("read after reset: %q %v", buf[:k], err)
	}

	// A deadline moved earlier while a Read waits ends that Read.
	d.SetReadDeadline(time.Now().Add(time.Hour))
	go func() {
		time.Sleep(10 * time.Millisecond)
		d.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	}()
	if _, err := d.Read(buf); !isTimeout(err) {
		t.Fatalf("read with a deadline moved earlier: %v", err)
	}
	// One moved later holds for it.
	d.SetReadDeadline(time.Time{})
	start = time.Now()
	d.SetReadDeadline(start.Add(150 * time.Millisecond))
	extended := make(chan time.Duration, 1)
	go func() {
		time.Sleep(5 * time.Millisecond)
		d.SetReadDeadline(time.Now().Add(10 * time.Second))
		extended <- time.Since(start)
		time.Sleep(200 * time.Millisecond)
		a.Write([]byte("late"))
	}()
	k, err := d.Read(buf)
	switch at := <-extended; {
	case err == nil && string(buf[:k]) == "late":
	case isTimeout(err) && at >= 150*time.Millisecond:
		t.Logf("the deadline was moved only after it passed (%v): a machine too busy to test it", at)
		d.SetReadDeadline(time.Time{})
		readFull(t, d, 4)
	default:
		t.Fatalf("read with a deadline moved later: %q %v", buf[:k], err)
	}

	// A deadline set in the past wakes a waiting Read.
	d.SetReadDeadline(time.Time{})
	go func() {
		time.Sleep(10 * time.Millisecond)
		d.SetDeadline(time.Now().Add(-time.Second))
	}()
	if _, err := d.Read(buf); !isTimeout(err) {
		t.Fatalf("read woken by a past deadline: %v", err)
	}
	// The write deadline passed too.
	if _, err := d.Write([]byte("y")); !isTimeout(err) {
		t.Fatalf("write past deadline: %v", err)
	}
	d.SetDeadline(time.Time{})
	if _, err := d.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if got := readFull(t, a, 1); string(got) != "y" {
		t.Fatalf("read %q", got)
	}
}

func TestBufferAndWriteDeadline(t *testing.T) {
	n := memnet.New()
	d, a := pair(t, n.Host("c"), listen(t, n.Host("s1"), "s1:7000"))

	// Writes do not wait for the reader while they fit.
	done := make(chan error, 1)
	go func() {
		_, err := d.Write(make([]byte, memnet.BufferSize-10))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write that fits in the buffer waited for the reader")
	}

	// One that does not fit writes what fits, then waits until its deadline.
	d.SetWriteDeadline(time.Now().Add(30 * time.Millisecond))
	k, err := d.Write(make([]byte, 100))
	if !isTimeout(err) || k != 10 {
		t.Fatalf("write into a full buffer: %d, %v; want 10, a timeout", k, err)
	}
	// Reset, it waits for the reader and completes.
	d.SetWriteDeadline(time.Time{})
	go func() {
		_, err := d.Write([]byte(strings.Repeat("z", 1000)))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("write into a full buffer returned before any read: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	got := readFull(t, a, memnet.BufferSize+1000)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if string(got[memnet.BufferSize:]) != strings.Repeat("z", 1000) {
		t.Fatal("the tail of the stream differs")
	}
}

func TestClose(t *testing.T) {
	n := memnet.New()
	lis := listen(t, n.Host("s1"), "s1:7000")
	t.Run("close", func(t *testing.T) {
		d, a := pair(t, n.Host("c"), lis)
		d.Write([]byte("hello"))
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("second close: %v", err)
		}
		// The peer reads what was written, then EOF, again and again.
		if got := readFull(t, a, 5); string(got) != "hello" {
			t.Fatalf("read %q", got)
		}
		for range 2 {
			if k, err := a.Read(make([]byte, 10)); k != 0 || err != io.EOF {
				t.Fatalf("read after the peer closed: %d, %v", k, err)
			}
		}
		// Its writes fail.
		if _, err := a.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("write to a closed peer: %v", err)
		}
		// The closed end fails both.
		if _, err := d.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read after close: %v", err)
		}
		if _, err := d.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("write after close: %v", err)
		}
		if err := d.SetDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("set deadline after close: %v", err)
		}
	})
	t.Run("wakes", func(t *testing.T) {
		// A close wakes this end's blocked Read and Write (net.ErrClosed)
		// and the peer's blocked Write (EPIPE).
		d, _ := pair(t, n.Host("c"), lis)
		d2, a2 := pair(t, n.Host("c"), lis)
		errs := make(chan error, 3)
		go func() { _, err := d.Read(make([]byte, 1)); errs <- err }()
		go func() { _, err := d.Write(make([]byte, memnet.BufferSize+1)); errs <- err }()
		go func() {
			k, err := a2.Write(make([]byte, memnet.BufferSize+1))
			if k > memnet.BufferSize {
				t.Errorf("the blocked write wrote %d bytes", k)
			}
			errs <- err
		}()
		time.Sleep(20 * time.Millisecond)
		d.Close()
		d2.Close()
		closed, broken := 0, 0
		for range 3 {
			select {
			case err := <-errs:
				switch {
				case errors.Is(err, net.ErrClosed):
					closed++
				case errors.Is(err, syscall.EPIPE):
					broken++
				default:
					t.Errorf("blocked call after close: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a close did not wake a blocked Read or Write")
			}
		}
		if closed != 2 || broken != 1 {
			t.Errorf("%d calls saw net.ErrClosed, %d EPIPE; want 2 and 1", closed, broken)
		}
	})
	t.Run("half", func(t *testing.T) {
		d, a := pair(t, n.Host("c"), lis)
		d.Write([]byte("question"))
		if err := d.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("write after CloseWrite: %v", err)
		}
		got, err := io.ReadAll(a)
		if err != nil || string(got) != "question" {
			t.Fatalf("ReadAll: %q, %v", got, err)
		}
		a.Write([]byte("answer"))
		a.Close()
		got, err = io.ReadAll(d)
		if err != nil || string(got) != "answer" {
			t.Fatalf("ReadAll after CloseWrite: %q, %v", got, err)
		}
	})
}

func TestDialRefused(t *testing.T) {
	n := memnet.New()
	c := n.Host("c")
	if _, err := c.Dial(context.Background(), "s1:7000"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to nothing: %v", err)
	}
	lis, err := n.Host("s1").Listen("s1:7000")
	if err != nil {
		t.Fatal(err)
	}
	queued, err := c.Dial(context.Background(), "s1:7000") // never accepted
	if err != nil {
		t.Fatal(err)
	}
	lis.Close()
	if _, err := queued.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read on a connection its listener closed before accepting: %v", err)
	}
	if _, err := c.Dial(context.Background(), "s1:7000"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to a closed listener: %v", err)
	}
}

func TestDialContext(t *testing.T) {
	n := memnet.New()
	c := n.Host("c")
	lis := listen(t, n.Host("s1"), "s1:7000")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Dial(ctx, "s1:7000"); !errors.Is(err, context.Canceled) {
		t.Fatalf("dial with a canceled ctx: %v", err)
	}
	// Fill the backlog of a listener that does not accept: a dial waits
	// until its ctx ends, or until an Accept makes room.
	var queued []net.Conn
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		conn, err := c.Dial(ctx, "s1:7000")
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, conn)
		if len(queued) > 10000 {
			t.Fatal("the backlog does not end")
		}
	}
	defer func() {
		for _, q := range queued {
			q.Close()
		}
	}()
	go func() {
		time.Sleep(20 * time.Millisecond)
		if a, err := lis.Accept(); err == nil {
			a.Close()
		}
	}()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.Dial(ctx, "s1:7000")
	if err != nil {
		t.Fatalf("dial after an accept made room: %v", err)
	}
	conn.Close()
}

// expectCut waits for the read on a cut connection to fail with a reset.
func expectCut(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: read on a cut connection: %v", what, err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: write on a cut connection: %v", what, err)
	}
}

// expectUp checks that a connection carries bytes both ways.
func expectUp(t *testing.T, x, y net.Conn, what string) {
	t.Helper()
	for _, dir := range [][2]net.Conn{{x, y}, {y, x}} {
		if _, err := dir[0].Write([]byte("p")); err != nil {
			t.Fatalf("%s: write: %v", what, err)
		}
		dir[1].SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(dir[1], make([]byte, 1)); err != nil {
			t.Fatalf("%s: read: %v", what, err)
		}
	}
}

func TestFaults(t *testing.T) {
	n := memnet.New()
	h := map[string]*memnet.Host{}
	lis := map[string]net.Listener{}
	for _, name := range []string{"s1", "s2", "s3"} {
		h[name] = n.Host(name)
		lis[name] = listen(t, h[name], name+":7000")
	}
	dialOK := func(from, to string) {
		t.Helper()
		c, err := h[from].Dial(context.Background(), to+":7000")
		if err != nil {
			t.Fatalf("dial %s -> %s: %v", from, to, err)
		}
		c.Close()
		a, _ := lis[to].Accept()
		a.Close()
	}
	dialCut := func(from, to string) {
		t.Helper()
		if _, err := h[from].Dial(context.Background(), to+":7000"); !errors.Is(err, syscall.EHOSTUNREACH) {
			t.Fatalf("dial %s -> %s across a cut: %v", from, to, err)
		}
	}

	t.Run("partition", func(t *testing.T) {
		d12, a12 := pair(t, h["s1"], lis["s2"])
		d23, a23 := pair(t, h["s2"], lis["s3"])
		d31, a31 := pair(t, h["s3"], lis["s1"])
		d11, a11 := pair(t, h["s1"], lis["s1"])
		blocked := make(chan error, 1)
		go func() { _, err := a12.Read(make([]byte, 1)); blocked <- err }()
		time.Sleep(5 * time.Millisecond)

		n.Partition([]string{"s1"}, []string{"s2", "s3"})
		if err := <-blocked; !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("a Read blocked on a connection cut: %v", err)
		}
		expectCut(t, d12, "s1->s2 dialer")
		expectCut(t, a31, "s3->s1 acceptor")
		expectCut(t, d31, "s3->s1 dialer")
		expectUp(t, d23, a23, "s2->s3")
		expectUp(t, d11, a11, "s1->s1")
		dialCut("s1", "s2")
		dialCut("s3", "s1")
		dialOK("s2", "s3")
		dialOK("s1", "s1")

		n.Heal()
		dialOK("s1", "s2")
		dialOK("s3", "s1")
		expectUp(t, d23, a23, "s2->s3 after heal")
	})

	t.Run("unnamed", func(t *testing.T) {
		defer n.Heal()
		// Hosts a partition does not name are a group of their own.
		n.Partition([]string{"s2"})
		dialOK("s1", "s3")
		dialCut("s1", "s2")
		dialCut("s2", "s3")
		h["s4"] = n.Host("s4") // a host made later is with the unnamed
		dialOK("s4", "s1")
		dialCut("s4", "s2")
		defer func() {
			if recover() == nil {
				t.Error("a host in two groups did not panic")
			}
		}()
		n.Partition([]string{"s1", "s2"}, []string{"s2"})
	})

	t.Run("isolate", func(t *testing.T) {
		d12, a12 := pair(t, h["s1"], lis["s2"])
		d23, a23 := pair(t, h["s2"], lis["s3"])
		d31, a31 := pair(t, h["s3"], lis["s1"])
		d22, a22 := pair(t, h["s2"], lis["s2"])
		n.Isolate("s2")
		expectCut(t, d12, "s1->s2")
		expectCut(t, a12, "s1->s2 acceptor")
		expectCut(t, d23, "s2->s3")
		expectCut(t, a23, "s2->s3 acceptor")
		expectUp(t, d31, a31, "s3->s1")
		expectUp(t, d22, a22, "s2->s2")
		dialCut("s2", "s1")
		dialCut("s3", "s2")
		dialOK("s2", "s2")
		dialOK("s1", "s3")
		// Isolating another host keeps s2 apart too.
		n.Isolate("s3")
		dialCut("s1", "s3")
		dialCut("s2", "s3")
		expectCut(t, d31, "s3->s1 after isolating s3")
		n.Heal()
		for _, from := range []string{"s1", "s2", "s3"} {
			for _, to := range []string{"s1", "s2", "s3"} {
				dialOK(from, to)
			}
		}
	})
}
