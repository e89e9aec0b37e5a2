package freeport

import (
	"fmt"
	"net"
	"strconv"
	"testing"
)

// The ports are distinct and free again (their listeners closed) when Ports
// returns; Addrs names the same kind of port on 127.0.0.1.
func TestPorts(t *testing.T) {
	ports, err := Ports(20)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 20 {
		t.Fatalf("got %d ports, want 20", len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("port %d: not positive or handed out twice (%v)", p, ports)
		}
		seen[p] = true
	}
	// Closed: each can be bound again (nothing else on a test machine is
	// likely to have taken one this fast).
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d still taken: %v", p, err)
		}
		l.Close()
	}

	addrs, err := Addrs(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" || port == "0" {
			t.Fatalf("Addrs: %q (%v), want 127.0.0.1:port", a, err)
		}
	}
	if ps, err := Ports(0); err != nil || len(ps) != 0 {
		t.Fatalf("Ports(0) = %v, %v", ps, err)
	}
}

// fixedListener claims a port of its choosing, as a kernel that hands a
// just-freed port out again would.
type fixedListener struct{ port int }

func (l fixedListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l fixedListener) Close() error              { return nil }
func (l fixedListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: l.port} }

// A port handed out once is never handed out again, even when the kernel
// offers it a second time.
func TestPortsNeverRepeat(t *testing.T) {
	offers := []int{41001, 41001, 41002}
	// A fresh record of what was given: an earlier test may have been
	// handed 41001 or 41002 by the kernel (a CI run was).
	old, oldGiven := listen, given
	given = map[int]bool{}
	defer func() { listen, given = old, oldGiven }()
	listen = func() (net.Listener, error) {
		p := offers[0]
		offers = offers[1:]
		return fixedListener{p}, nil
	}
	a, err := Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	if a[0] != 41001 || b[0] != 41002 {
		t.Fatalf("two calls got ports %v and %v; want 41001, then 41002 (41001 again skipped)", a, b)
	}
}

// LocalBase's five ranges are free, and a second call gives ranges that do
// not meet the first's.
func TestLocalBase(t *testing.T) {
	a, err := LocalBase(4)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LocalBase(4)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("two calls gave base %d", a)
	}
	for off := 0; off <= 400; off += 100 {
		for i := 1; i <= 4; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", a+off+i))
			if err != nil {
				t.Fatalf("port %d of base %d: %v", a+off+i, a, err)
			}
			l.Close()
		}
	}
}
