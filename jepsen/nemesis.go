package jepsen

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
)

// A Nemesis injects one kind of fault and heals it. Inject returns a short
// description of what it did; Heal undoes it (and is called even when
// Inject failed half-way). Both are called from one goroutine, one fault at
// a time.
type Nemesis interface {
	Name() string
	Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error)
	Heal(ctx context.Context, c *Cluster) error
}

// Nemeses lists the nemeses by name. Partitions need a Lab.
func Nemeses(lab *Lab) map[string]Nemesis {
	m := map[string]Nemesis{
		"kill":         &killNemesis{},
		"kill-leader":  &killNemesis{leader: true},
		"restart":      &killNemesis{now: true},
		"pause":        &pauseNemesis{},
		"pause-leader": &pauseNemesis{leader: true},
	}
	addNemeses(m, lab)
	if lab != nil {
		m["partition-minority"] = &partitionNemesis{lab: lab, kind: "minority"}
		m["partition-leader"] = &partitionNemesis{lab: lab, kind: "leader"}
		m["partition-halves"] = &partitionNemesis{lab: lab, kind: "halves"}
	}
	return m
}

// NemesisNames lists the known names, sorted.
func NemesisNames(lab *Lab) []string {
	var out []string
	for n := range Nemeses(lab) {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// pickTarget is the leader (when asked and one is seen) or a random voter.
// It draws from r either way, so that the seeded schedule does not depend
// on whether a leader was seen at that moment.
func pickTarget(ctx context.Context, c *Cluster, r *rand.Rand, leader bool) int {
	i := r.Intn(c.Size())
	if leader {
		if l := c.Leader(ctx); l >= 0 {
			return l
		}
	}
	return i
}

// killNemesis crashes a server with SIGKILL. It restarts it at Heal, or at
// once (now): clients reconnect to the restarted process immediately.
type killNemesis struct {
	leader, now bool
	down        []int
}

func (n *killNemesis) Name() string {
	switch {
	case n.now:
		return "restart"
	case n.leader:
		return "kill-leader"
	}
	return "kill"
}

func (n *killNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	i := pickTarget(ctx, c, r, n.leader)
	c.Kill(i)
	if n.now {
		return fmt.Sprintf("kill -9 %s and start it at once", c.ID(i)), c.Start(i)
	}
	n.down = append(n.down, i)
	return "kill -9 " + c.ID(i), nil
}

func (n *killNemesis) Heal(ctx context.Context, c *Cluster) error {
	var err error
	for _, i := range n.down {
		if !c.Running(i) {
			if e := c.Start(i); e != nil {
				err = e
			}
		}
	}
	n.down = nil
	return err
}

// pauseNemesis stops a server with SIGSTOP until Heal sends SIGCONT.
type pauseNemesis struct {
	leader bool
	paused []int
}

func (n *pauseNemesis) Name() string {
	if n.leader {
		return "pause-leader"
	}
	return "pause"
}

func (n *pauseNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	i := pickTarget(ctx, c, r, n.leader)
	n.paused = append(n.paused, i)
	return "SIGSTOP " + c.ID(i), c.Pause(i)
}

func (n *pauseNemesis) Heal(ctx context.Context, c *Cluster) error {
	var err error
	for _, i := range n.paused {
		if c.Running(i) {
			if e := c.Resume(i); e != nil {
				err = e
			}
		}
	}
	n.paused = nil
	return err
}

// partitionNemesis cuts the voters apart with iptables in their
// namespaces (or with the Proxy): a random minority from the majority, the leader from the
// rest, or random halves (which may leave no majority).
type partitionNemesis struct {
	lab  partitioner
	kind string
}

// partitioner cuts the servers into groups and heals: the Lab, or the
// Proxy where there is no Lab.
type partitioner interface {
	Partition(groups [][]int) error
	Heal() error
}

func (n *partitionNemesis) Name() string { return "partition-" + n.kind }

func (n *partitionNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	all := r.Perm(c.Size())
	var small []int
	switch n.kind {
	case "leader":
		small = []int{pickTarget(ctx, c, r, true)}
	case "minority":
		small = all[:(c.Voters()-1)/2]
		if len(small) == 0 {
			small = all[:1]
		}
	default:
		small = all[:1+r.Intn(c.Size()-1)]
	}
	in := map[int]bool{}
	for _, i := range small {
		in[i] = true
	}
	var rest []int
	for i := 0; i < c.Size(); i++ {
		if !in[i] {
			rest = append(rest, i)
		}
	}
	sort.Ints(small)
	return fmt.Sprintf("partition %s | %s", ids(c, small), ids(c, rest)), n.lab.Partition([][]int{small, rest})
}

func (n *partitionNemesis) Heal(ctx context.Context, c *Cluster) error { return n.lab.Heal() }

func ids(c *Cluster, is []int) string {
	var s []string
	for _, i := range is {
		s = append(s, c.ID(i))
	}
	return strings.Join(s, ",")
}
