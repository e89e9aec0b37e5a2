package server

// isolate and heal close and open a server's netGate: TestCluster.Isolate
// and Heal cut a server of this package's test clusters off from the others
// over real TCP. The product never closes its gate; they live in a test
// file so that none of this ships.

// isolate closes the gate and every connection through it.
func (g *netGate) isolate() {
	g.cut.Store(true)
	g.mu.Lock()
	conns := make([]*gatedConn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (g *netGate) heal() { g.cut.Store(false) }
