package jepsen

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is the network nemeses' fallback where there is no Lab (not root,
// or -net proxy): a fault-injecting TCP proxy on every server-to-server
// link, on loopback, with no privileges.
//
// Raft dials the addresses in its configuration, which is replicated (in
// log entries and snapshots) and so must be the same on every server: a
// proxy address per (source, target) pair cannot be given. Instead each
// target server j has one proxy address for raft and one for gRPC, shared
// by all sources; that is j's address in every server's raft configuration
// (coord -raft-advertise) and in every -peers list, while j itself listens
// elsewhere. Server i makes its connections to the other servers from its
// own loopback address, 127.0.0.(11+i) (coord -peer-source-ip; all of
// 127/8 is local on Linux), so the proxy knows the source of each
// connection it accepts and applies the rules of the directed links i→j
// (the bytes i sends) and j→i (the bytes j answers). The runner's clients
// dial the servers directly and are never cut, as on the Lab's bridge.
// All server-to-server traffic (raft, and the forwards, touches, read
// index and admin calls between servers) is the peer plane on the raft
// port, mutual TLS under the cluster key: the raft proxy carries it as
// opaque bytes and needs no key.
//
// What the rules mean on TCP, which has no packets to drop:
//   - cut i→j: the bytes i sends to j are read and thrown away, on new
//     connections and on those already open; j's bytes still reach i. A
//     link cut both ways refuses new connections (accepted, then closed at
//     once) and closes the open ones. At Heal a connection that lost bytes
//     is closed: its stream has a hole, and the servers reconnect.
//   - delay d on i→j: every chunk i sends to j is forwarded d after it was
//     read, in order (a pipe, not a rate limit).
//   - loss p on i→j: each chunk is "lost" with probability p and then held
//     back a retransmission timeout (200 ms, doubling while it keeps being
//     lost, as TCP backs off), delaying everything behind it; a chunk lost
//     four times in a row resets the connection. That is what loss does to
//     a TCP stream: stalls, and broken connections when it is heavy.
//
// Every goroutine and listener belongs to the Proxy; Close stops them all.
type Proxy struct {
	log *slog.Logger

	mu      sync.Mutex
	rules   map[link]rule
	stats   map[link]*linkStats
	conns   map[*proxyConn]struct{}
	ls      []net.Listener
	rnd     *rand.Rand
	closed  bool
	wg      sync.WaitGroup
	targets int
}

// link is a direction between two servers: the bytes from sends to to.
type link struct{ from, to int }

type rule struct {
	cut   bool
	delay time.Duration
	loss  float64
}

type linkStats struct {
	refused, closed, resets, forwarded, dropped, stalled, delayed atomic.Int64
}

// proxySource is server i's loopback address for its connections to the
// other servers.
func proxySource(i int) string { return fmt.Sprintf("127.0.0.%d", 11+i) }

// proxyRTO is how long a "lost" chunk is held back, the first time.
const proxyRTO = 200 * time.Millisecond

// NewProxy makes a proxy with no targets; Close it when done.
func NewProxy(seed int64, log *slog.Logger) *Proxy {
	return &Proxy{log: log, rules: map[link]rule{}, stats: map[link]*linkStats{},
		conns: map[*proxyConn]struct{}{}, rnd: rand.New(rand.NewSource(seed))}
}

// Target starts proxying server i (index) whose raft and gRPC listen on
// raft and grpc, and returns the proxy's two addresses for them.
func (p *Proxy) Target(i int, raft, grpc string) (proxyRaft, proxyGRPC string, err error) {
	var addrs []string
	for _, real := range []string{raft, grpc} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", "", err
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.Close()
			return "", "", errors.New("jepsen: proxy closed")
		}
		p.ls = append(p.ls, l)
		p.targets = max(p.targets, i+1)
		p.wg.Add(1)
		p.mu.Unlock()
		go p.accept(l, i, real)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs[0], addrs[1], nil
}

// source is the server a connection comes from, by its address, or -1
// (the runner, or a server the proxy does not know).
func (p *Proxy) source(a net.Addr) int {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return -1
	}
	ip := ta.IP.To4()
	p.mu.Lock()
	n := p.targets
	p.mu.Unlock()
	if ip == nil || ip[0] != 127 || ip[1] != 0 || ip[2] != 0 || int(ip[3]) < 11 || int(ip[3]) >= 11+n {
		return -1
	}
	return int(ip[3]) - 11
}

func (p *Proxy) accept(l net.Listener, to int, real string) {
	defer p.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		from := p.source(c.RemoteAddr())
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		if p.rules[link{from, to}].cut && p.rules[link{to, from}].cut {
			p.statsLocked(link{from, to}).refused.Add(1)
			p.mu.Unlock()
			c.Close()
			continue
		}
		pc := &proxyConn{from: from, to: to, a: c, done: make(chan struct{})}
		p.conns[pc] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(pc, real)
	}
}

// proxyConn is one proxied connection: a from the source, b to the target.
type proxyConn struct {
	from, to int
	a, b     net.Conn
	lossy    atomic.Bool // bytes were thrown away: close it at Heal
	once     sync.Once
	done     chan struct{}
}

func (pc *proxyConn) close() {
	pc.once.Do(func() {
		close(pc.done)
		pc.a.Close()
		if pc.b != nil {
			pc.b.Close()
		}
	})
}

func (pc *proxyConn) isClosed() bool {
	select {
	case <-pc.done:
		return true
	default:
		return false
	}
}

func (p *Proxy) serve(pc *proxyConn, real string) {
	defer p.wg.Done()
	defer func() {
		pc.close()
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	b, err := net.DialTimeout("tcp", real, 2*time.Second)
	if err != nil {
		return // the target is down: the source sees its connection closed
	}
	p.mu.Lock()
	pc.b = b
	closed := p.closed
	p.mu.Unlock()
	if closed {
		b.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(pc, link{pc.from, pc.to}, pc.a, b) }()
	go func() { defer wg.Done(); p.pipe(pc, link{pc.to, pc.from}, b, pc.a) }()
	wg.Wait()
}

type chunk struct {
	b   []byte
	due time.Time
}

// pipe forwards what r reads to w under the rules of link k, until either
// side fails or the connection is closed; then it closes the connection
// (both directions: raft and gRPC never half-close).
func (p *Proxy) pipe(pc *proxyConn, k link, r, w net.Conn) {
	var reader sync.WaitGroup
	defer reader.Wait()
	defer pc.close()
	ch := make(chan chunk, 64) // at most 64 chunks of 32 kB in flight
	reader.Add(1)
	go func() {
		defer reader.Done()
		defer close(ch)
		lost, last := 0, time.Time{}
		for {
			buf := make([]byte, 32<<10)
			n, err := r.Read(buf)
			if n > 0 {
				ru, st := p.rule(k)
				if ru.cut {
					st.dropped.Add(int64(n))
					pc.lossy.Store(true)
				} else {
					due := time.Now().Add(ru.delay)
					if ru.delay > 0 {
						st.delayed.Add(1)
					}
					for rto := proxyRTO; ru.loss > 0 && p.chance(ru.loss); rto *= 2 {
						st.stalled.Add(1)
						if lost++; lost >= 4 {
							st.resets.Add(1)
							return
						}
						due = due.Add(rto)
					}
					lost = 0
					if due.Before(last) {
						due = last // in order, behind a stalled chunk
					}
					last = due
					select {
					case ch <- chunk{buf[:n], due}:
					case <-pc.done:
						return
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		if d := time.Until(c.due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-pc.done:
				t.Stop()
				return
			}
		}
		if _, err := w.Write(c.b); err != nil {
			return
		}
		_, st := p.rule(k)
		st.forwarded.Add(int64(len(c.b)))
	}
}

func (p *Proxy) rule(k link) (rule, *linkStats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rules[k], p.statsLocked(k)
}

func (p *Proxy) statsLocked(k link) *linkStats {
	st := p.stats[k]
	if st == nil {
		st = &linkStats{}
		p.stats[k] = st
	}
	return st
}

func (p *Proxy) chance(f float64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rnd.Float64() < f
}

// set changes the rule of each directed link from→to and applies it to the
// open connections: those on a link now cut both ways are closed.
func (p *Proxy) set(links []link, f func(*rule)) {
	p.mu.Lock()
	for _, k := range links {
		r := p.rules[k]
		f(&r)
		p.rules[k] = r
	}
	var doomed []*proxyConn
	for pc := range p.conns {
		if pc.isClosed() {
			continue // closed already (by Heal, say), its serve not yet done
		}
		if p.rules[link{pc.from, pc.to}].cut && p.rules[link{pc.to, pc.from}].cut {
			p.statsLocked(link{pc.from, pc.to}).closed.Add(1)
			doomed = append(doomed, pc)
		}
	}
	p.mu.Unlock()
	for _, pc := range doomed {
		pc.close()
	}
}

// Partition cuts the servers into groups, both ways, as Lab.Partition
// does: a server in no group keeps every link.
func (p *Proxy) Partition(groups [][]int) error {
	var links []link
	for g, a := range groups {
		for h, b := range groups {
			if g == h {
				continue
			}
			for _, i := range a {
				for _, j := range b {
					links = append(links, link{i, j})
				}
			}
		}
	}
	p.set(links, func(r *rule) { r.cut = true })
	return nil
}

// Cut drops the bytes server from sends to server to (one way).
func (p *Proxy) Cut(from, to int) { p.set([]link{{from, to}}, func(r *rule) { r.cut = true }) }

// Delay holds back by d the bytes server from sends to each of to.
func (p *Proxy) Delay(from int, to []int, d time.Duration) {
	var links []link
	for _, j := range to {
		links = append(links, link{from, j})
	}
	p.set(links, func(r *rule) { r.delay = d })
}

// Loss makes server i's links to and from each of peers lose chunks with
// probability f (see Proxy).
func (p *Proxy) Loss(i int, peers []int, f float64) {
	var links []link
	for _, j := range peers {
		links = append(links, link{i, j}, link{j, i})
	}
	p.set(links, func(r *rule) { r.loss = f })
}

// Heal removes every rule and closes the connections that lost bytes.
func (p *Proxy) Heal() error {
	p.mu.Lock()
	p.rules = map[link]rule{}
	var lossy []*proxyConn
	for pc := range p.conns {
		if pc.lossy.Load() {
			lossy = append(lossy, pc)
		}
	}
	p.mu.Unlock()
	for _, pc := range lossy {
		pc.close()
	}
	return nil
}

// ProxyCounts is what the proxy did on one directed link.
type ProxyCounts struct {
	// Refused connections (the link was cut both ways) and Closed ones (it
	// was cut while they were open); Resets by loss.
	Refused, Closed, Resets int64
	// Bytes forwarded and Dropped (cut one way); chunks Stalled (lost and
	// held back) and Delayed.
	Forwarded, Dropped, Stalled, Delayed int64
}

// Counts returns the counts of every directed link, by server indexes
// (-1: a connection from outside the cluster), and resets them.
func (p *Proxy) Counts() map[[2]int]ProxyCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[[2]int]ProxyCounts{}
	for k, st := range p.stats {
		out[[2]int{k.from, k.to}] = ProxyCounts{Refused: st.refused.Swap(0), Closed: st.closed.Swap(0), Resets: st.resets.Swap(0),
			Forwarded: st.forwarded.Swap(0), Dropped: st.dropped.Swap(0), Stalled: st.stalled.Swap(0), Delayed: st.delayed.Swap(0)}
	}
	return out
}

// Close stops every listener and connection and waits for their
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	ls := p.ls
	p.ls = nil
	var conns []*proxyConn
	for pc := range p.conns {
		conns = append(conns, pc)
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, pc := range conns {
		pc.close()
	}
	p.wg.Wait()
	return nil
}

// countsString says what the proxy did to the faulted links, say
// "s1->s2 refused 3, closed 2, dropped 812 B; s2->s1 ...", leaving out the
// links it only forwarded on.
func countsString(c *Cluster, counts map[[2]int]ProxyCounts) string {
	var keys [][2]int
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a][0] != keys[b][0] {
			return keys[a][0] < keys[b][0]
		}
		return keys[a][1] < keys[b][1]
	})
	name := func(i int) string {
		if i < 0 || i >= c.Size() {
			return "?"
		}
		return c.ID(i)
	}
	var parts []string
	for _, k := range keys {
		n := counts[k]
		var f []string
		for _, x := range []struct {
			what string
			v    int64
		}{{"refused", n.Refused}, {"closed", n.Closed}, {"reset", n.Resets}, {"dropped B", n.Dropped}, {"stalled", n.Stalled}, {"delayed", n.Delayed}} {
			if x.v > 0 {
				f = append(f, fmt.Sprintf("%s %d", x.what, x.v))
			}
		}
		if len(f) > 0 {
			parts = append(parts, fmt.Sprintf("%s->%s %s (forwarded %d B)", name(k[0]), name(k[1]), strings.Join(f, ", "), n.Forwarded))
		}
	}
	if len(parts) == 0 {
		return "proxy: nothing refused, dropped or held back"
	}
	return "proxy: " + strings.Join(parts, "; ")
}
