// Package freeport picks loopback TCP ports for tests and tools that start
// servers: it listens on 127.0.0.1:0 and lets the kernel choose.
//
// A port is free only at the moment it is picked: the listeners are closed
// before the ports are returned, so the caller's servers can bind them, and
// another process may take one in between (rarely, on a busy machine).
package freeport

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Ports returns n distinct loopback ports the kernel had free. All n
// listeners are open at once while picking, so no port is handed out twice
// by one call; and no port this process was handed before is handed out
// again (two calls in a row could otherwise get the same port back, as a
// jepsen run with a proxy once did: its s1 and s3 were given one gRPC
// port). Every listener is closed before Ports returns.
func Ports(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	mu.Lock()
	defer mu.Unlock()
	ports := make([]int, 0, n)
	for len(ports) < n {
		if len(ls) > n+1000 {
			return nil, errors.New("freeport: the kernel keeps handing out ports given out before")
		}
		l, err := listen()
		if err != nil {
			return nil, err
		}
		ls = append(ls, l) // held, so the kernel picks another next time
		p := l.Addr().(*net.TCPAddr).Port
		if given[p] {
			continue
		}
		given[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// given holds every port this process was handed (under mu).
var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// listen asks the kernel for a port (tests replace it).
var listen = func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// Addrs is Ports as "127.0.0.1:port" addresses.
func Addrs(n int) ([]string, error) {
	ports, err := Ports(n)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, n)
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs, nil
}

// LocalBase returns a base port for `coord local -base-port` with n
// servers: base+i, +100+i, +200+i, +300+i and +400+i (i = 1..n) were free
// on loopback when checked, and none was handed out before by this process.
// Bases lie below Linux's ephemeral range (32768 up), so an outgoing
// connection meanwhile does not take one.
func LocalBase(n int) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for try := 0; try < 200; try++ {
		base := 20000 + 10*rand.IntN(1200)
		ok := true
		for off := 0; off <= 400 && ok; off += 100 {
			for i := 1; i <= n && ok; i++ {
				p := base + off + i
				l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
				if err != nil || given[p] {
					ok = false
				}
				if err == nil {
					l.Close()
				}
			}
		}
		if ok {
			for off := 0; off <= 400; off += 100 {
				for i := 1; i <= n; i++ {
					given[base+off+i] = true
				}
			}
			return base, nil
		}
	}
	return 0, errors.New("freeport: no free base for coord local")
}
