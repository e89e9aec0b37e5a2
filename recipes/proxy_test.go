package recipes_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxySet stands between one session and the servers: a loopback proxy per
// server. freeze makes the servers unreachable for that session (existing
// connections are cut, new ones accepted and left silent), so the session
// stops heartbeating and expires; thaw lets it through again.
type proxySet struct {
	mu      sync.Mutex
	frozen  bool
	proxies []*proxy
	held    []net.Conn
}

type proxy struct {
	set    *proxySet
	ln     net.Listener
	target string
	conns  []net.Conn
}

// addrs starts a proxy per server address (once) and returns theirs.
func (s *proxySet) addrs(t testing.TB, targets []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proxies == nil {
		for _, tg := range targets {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatalf("proxy: %v", err)
			}
			p := &proxy{set: s, ln: ln, target: tg}
			s.proxies = append(s.proxies, p)
			go p.serve()
		}
		t.Cleanup(s.close)
	}
	var out []string
	for _, p := range s.proxies {
		out = append(out, p.ln.Addr().String())
	}
	return out
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.set.mu.Lock()
		if p.set.frozen {
			p.set.held = append(p.set.held, c)
			p.set.mu.Unlock()
			continue
		}
		p.set.mu.Unlock()
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.set.mu.Lock()
		if p.set.frozen {
			p.set.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.set.mu.Unlock()
		go func() { io.Copy(s, c); s.Close(); c.Close() }()
		go func() { io.Copy(c, s); s.Close(); c.Close() }()
	}
}

// freeze cuts the session off from every server.
func (s *proxySet) freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = true
	for _, p := range s.proxies {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// thaw lets the session reach the servers again.
func (s *proxySet) thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = false
	for _, c := range s.held {
		c.Close()
	}
	s.held = nil
}

func (s *proxySet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.proxies {
		p.ln.Close()
		for _, c := range p.conns {
			c.Close()
		}
	}
	for _, c := range s.held {
		c.Close()
	}
}
