// Package freeport picks loopback TCP ports for tests and tools that start
// servers: it listens on 127.0.0.1:0 and lets the kernel choose.
//
// A port is free only at the moment it is picked: the listeners are closed
// before the ports are returned, so the caller's servers can bind them, and
// another process may take one in between (rarely, on a busy machine).
package freeport

import (
	"net"
	"strconv"
)

// Ports returns n distinct loopback ports the kernel had free. All n
// listeners are open at once while picking, so no port is handed out twice;
// every one is closed before Ports returns.
func Ports(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

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
