package jepsen

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"
)

// The network nemeses on the Proxy, where there is no Lab: the same names
// and the same choices of servers as on the Lab, the faults as the Proxy
// can make them on TCP (see Proxy). Heal notes what the proxy counted on
// the faulted links and what each server's /health said just before.

// addProxyNemeses registers them.
func addProxyNemeses(m map[string]Nemesis, p *Proxy) {
	for _, k := range []string{"minority", "leader", "halves", "bridge", "oneway", "loss", "latency"} {
		n := &proxyNemesis{p: p, kind: k}
		m[n.Name()] = n
	}
}

type proxyNemesis struct {
	p    *Proxy
	kind string
	note string
}

func (n *proxyNemesis) Name() string {
	switch n.kind {
	case "loss", "latency":
		return n.kind
	}
	return "partition-" + n.kind
}

func (n *proxyNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	n.note = ""
	n.p.Counts() // from zero
	switch n.kind {
	case "minority", "leader", "halves":
		desc, err := (&partitionNemesis{lab: n.p, kind: n.kind}).Inject(ctx, c, r)
		return "proxy: " + desc, err
	case "bridge":
		perm := r.Perm(c.Voters())
		b, rest := perm[0], perm[1:]
		a, z := append([]int{}, rest[:len(rest)/2]...), append([]int{}, rest[len(rest)/2:]...)
		sort.Ints(a)
		sort.Ints(z)
		return fmt.Sprintf("proxy: bridge %s sees %s | %s", c.ID(b), ids(c, a), ids(c, z)), n.p.Partition([][]int{a, z})
	case "oneway":
		i := r.Intn(c.Voters())
		var peers []int
		for _, j := range r.Perm(c.Voters()) {
			if j != i && (len(peers) == 0 || r.Intn(2) == 0) {
				peers = append(peers, j)
			}
		}
		sort.Ints(peers)
		out := r.Intn(2) == 0
		for _, j := range peers {
			if out {
				n.p.Cut(i, j)
			} else {
				n.p.Cut(j, i)
			}
		}
		if out {
			return fmt.Sprintf("proxy: %s receives from %s but its bytes to them are dropped", c.ID(i), ids(c, peers)), nil
		}
		return fmt.Sprintf("proxy: %s drops what %s send; its own bytes reach them", c.ID(i), ids(c, peers)), nil
	case "loss":
		i := r.Intn(c.Size())
		f := 0.10 + 0.20*r.Float64()
		n.p.Loss(i, others(c, i), f)
		return fmt.Sprintf("proxy: %s loses %.0f%% of its chunks to and from its peers (each held back %v, doubling; reset after 4 in a row)", c.ID(i), 100*f, proxyRTO), nil
	}
	i := r.Intn(c.Size())
	d := time.Duration(50+r.Intn(151)) * time.Millisecond
	n.p.Delay(i, others(c, i), d)
	return fmt.Sprintf("proxy: %s's bytes to its peers are delayed %v", c.ID(i), d), nil
}

func (n *proxyNemesis) Heal(ctx context.Context, c *Cluster) error {
	counts := countsString(c, n.p.Counts())
	n.note = counts + "; /health before heal: " + healthAll(ctx, c)
	return n.p.Heal()
}

// HealNote is what the proxy counted during the fault and what the
// servers said of themselves before it was healed.
func (n *proxyNemesis) HealNote() string { return n.note }

func others(c *Cluster, i int) []int {
	var out []int
	for j := 0; j < c.Size(); j++ {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

// healthAll is every server's role from its /health: "s1 leader, s2
// follower (not serving), s3 candidate (not serving)".
func healthAll(ctx context.Context, c *Cluster) string {
	var parts []string
	for i := 0; i < c.Size(); i++ {
		h, err := c.Health(ctx, i)
		switch {
		case err != nil:
			parts = append(parts, c.ID(i)+" ?")
		case h.Healthy:
			parts = append(parts, c.ID(i)+" "+h.Role)
		default:
			parts = append(parts, c.ID(i)+" "+h.Role+" (not serving)")
		}
	}
	return strings.Join(parts, ", ")
}
