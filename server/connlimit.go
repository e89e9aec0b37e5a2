package server

import "sync"

// addrLimiter counts a server's client connections (ZooKeeper protocol
// connections and gRPC session streams) per client address, as ZooKeeper's
// maxClientCnxns does; max 0 is no limit.
type addrLimiter struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newAddrLimiter(max int) *addrLimiter { return &addrLimiter{max: max, n: map[string]int{}} }

// acquire counts a new connection from ip, unless ip has max already.
func (l *addrLimiter) acquire(ip string) bool {
	if l.max <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[ip] >= l.max {
		return false
	}
	l.n[ip]++
	return true
}

// release uncounts a connection from ip that acquire let in.
func (l *addrLimiter) release(ip string) {
	if l.max <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[ip]--; l.n[ip] <= 0 {
		delete(l.n, ip)
	}
}
