package server

import (
	"sync"
	"syscall"
)

// addrLimiter counts a server's client connections (ZooKeeper protocol
// connections and gRPC session streams) per client address, as ZooKeeper's
// maxClientCnxns does (max 0 is no limit), and in all (total 0 is no
// limit).
type addrLimiter struct {
	max, total int
	mu         sync.Mutex
	n          map[string]int
	open       int
}

func newAddrLimiter(max, total int) *addrLimiter {
	return &addrLimiter{max: max, total: total, n: map[string]int{}}
}

// Why acquire refused a connection (the refused-connections metric's
// reasons).
const (
	refusedPerAddress = "per_address_limit"
	refusedTotal      = "total_limit"
)

// acquire counts a new connection from ip, unless ip has max already or
// the server total; it returns "" or why it refused.
func (l *addrLimiter) acquire(ip string) string {
	if l.max <= 0 && l.total <= 0 {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total > 0 && l.open >= l.total {
		return refusedTotal
	}
	if l.max > 0 && l.n[ip] >= l.max {
		return refusedPerAddress
	}
	l.n[ip]++
	l.open++
	return ""
}

// release uncounts a connection from ip that acquire let in.
func (l *addrLimiter) release(ip string) {
	if l.max <= 0 && l.total <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.n[ip]--; l.n[ip] <= 0 {
		delete(l.n, ip)
	}
}

// clientConnsTotal is the default bound on a server's client connections:
// its open-file limit less a reserve for everything else the server opens
// (raft's and the peer plane's connections, gossip, the log's segments,
// snapshots). With none kept back, a storm of clients (100,000 sessions
// moving between 7 servers at once, each with a limit of 20,000 files)
// took every descriptor: raft could neither dial nor accept, the voters
// lost their leader for longer than the sessions' timeout, and half the
// sessions expired. Refused at once instead, a client tries another
// server. 0 (no bound) where the limit cannot be read.
func clientConnsTotal() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 || lim.Cur > 1<<30 {
		return 0
	}
	soft := int(lim.Cur)
	return max(1, soft-max(256, soft/16))
}
