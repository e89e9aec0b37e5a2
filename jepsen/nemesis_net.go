package jepsen

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"sort"
	"strings"
	"time"
)

// The network nemeses beyond clean splits: a bridge node, one-way loss,
// random packet loss and a slow link. All of them work inside the servers'
// namespaces of the Lab and are healed by flushing the namespace's filter
// table (Lab.Heal) and deleting the root qdisc of its veth.

// netNemesis is a partition-bridge, partition-oneway, loss or latency
// fault.
type netNemesis struct {
	lab  *Lab
	kind string // bridge, oneway, loss, latency
	// shaped are the servers whose veth has a qdisc to delete at Heal;
	// probe is what Heal measured (the evidence it adds to the fault).
	shaped []int
	probes []func() string
	note   string
}

func (n *netNemesis) Name() string {
	switch n.kind {
	case "bridge", "oneway":
		return "partition-" + n.kind
	}
	return n.kind
}

func (n *netNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	n.note, n.probes = "", nil
	switch n.kind {
	case "bridge":
		return n.bridge(c, r)
	case "oneway":
		return n.oneway(c, r)
	case "loss":
		return n.loss(c, r)
	}
	return n.latency(ctx, c, r)
}

// bridge: one voter sees both halves; the halves do not see each other.
// With 3 voters the halves are single servers (s1 | s2 | s3 bridges).
func (n *netNemesis) bridge(c *Cluster, r *rand.Rand) (string, error) {
	perm := r.Perm(c.Voters())
	b, rest := perm[0], perm[1:]
	a, z := append([]int{}, rest[:len(rest)/2]...), append([]int{}, rest[len(rest)/2:]...)
	sort.Ints(a)
	sort.Ints(z)
	desc := fmt.Sprintf("bridge %s sees %s | %s", c.ID(b), ids(c, a), ids(c, z))
	if err := n.lab.Partition([][]int{a, z}); err != nil {
		return desc, err
	}
	return desc + "; probe: " + n.lab.probe(c, a[0], z[0]) + ", " + n.lab.probe(c, a[0], b) + ", " + n.lab.probe(c, z[0], b), nil
}

// oneway: server i's packets to some peers are dropped while it still
// receives theirs (out), or it drops what they send while its own packets
// reach them (in). Both rules sit in i's namespace.
func (n *netNemesis) oneway(c *Cluster, r *rand.Rand) (string, error) {
	i := r.Intn(c.Voters())
	var peers []int
	for _, j := range r.Perm(c.Voters()) {
		if j != i && (len(peers) == 0 || r.Intn(2) == 0) {
			peers = append(peers, j)
		}
	}
	sort.Ints(peers)
	out := r.Intn(2) == 0
	// The ACCEPT rules only count what still gets through the other way.
	var b strings.Builder
	for _, j := range peers {
		if out {
			fmt.Fprintf(&b, "-A OUTPUT -d %s -j DROP\n-A INPUT -s %s -j ACCEPT\n", n.lab.Host(j), n.lab.Host(j))
		} else {
			fmt.Fprintf(&b, "-A INPUT -s %s -j DROP\n-A OUTPUT -d %s -j ACCEPT\n", n.lab.Host(j), n.lab.Host(j))
		}
	}
	desc := fmt.Sprintf("%s receives from %s but its packets to them are dropped", c.ID(i), ids(c, peers))
	if !out {
		desc = fmt.Sprintf("%s drops what %s send; its own packets reach them", c.ID(i), ids(c, peers))
	}
	if err := n.lab.Filter(i, b.String()); err != nil {
		return desc, err
	}
	n.probes = append(n.probes, func() string { return c.ID(i) + " counted " + n.lab.ruleCounts(i) })
	return desc, nil
}

// loss drops a random share (10-30%) of the packets a server sends and
// receives (iptables' statistic match: the kernel here may lack netem).
func (n *netNemesis) loss(c *Cluster, r *rand.Rand) (string, error) {
	i := r.Intn(c.Size())
	p := 0.10 + 0.20*r.Float64()
	rule := fmt.Sprintf("-m statistic --mode random --probability %.3f -j DROP", p)
	body := "-A INPUT " + rule + "\n-A OUTPUT " + rule + "\n"
	desc := fmt.Sprintf("%s loses %.0f%% of its packets in and out", c.ID(i), 100*p)
	if err := n.lab.Filter(i, body); err != nil {
		return desc, err
	}
	n.probes = append(n.probes, func() string { return c.ID(i) + " counted " + n.lab.ruleCounts(i) })
	return desc, nil
}

// latency slows a server's outgoing link: netem delay 50-200 ms with 20%
// jitter where the kernel has netem, otherwise (as on the machine this was
// written on, whose kernel lacks sch_netem) a token bucket of 64-256
// kbit/s, so that every packet waits behind the ones before it.
func (n *netNemesis) latency(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	i := r.Intn(c.Size())
	dev := n.lab.Link(i)
	before := metricsTime(ctx, c, i)
	delay := 50 + r.Intn(151)
	args := []string{"qdisc", "add", "dev", dev, "root", "netem", "delay", fmt.Sprintf("%dms", delay), fmt.Sprintf("%dms", delay/5)}
	n.shaped = append(n.shaped, i)
	out, err := n.lab.Exec(i, "tc", args...)
	desc := fmt.Sprintf("%s: netem delay %d ms ± %d ms on %s", c.ID(i), delay, delay/5, dev)
	if err != nil && strings.Contains(out, "unknown") {
		rate := 64 << r.Intn(3)
		args = []string{"qdisc", "add", "dev", dev, "root", "tbf", "rate", fmt.Sprintf("%dkbit", rate), "burst", "1600", "latency", "1s"}
		out, err = n.lab.Exec(i, "tc", args...)
		desc = fmt.Sprintf("%s: no netem in this kernel; tbf rate %d kbit/s (queueing delay) on %s", c.ID(i), rate, dev)
	}
	if err != nil {
		return desc, fmt.Errorf("tc %s: %v: %s", strings.Join(args, " "), err, out)
	}
	show, _ := n.lab.Exec(i, "tc", "qdisc", "show", "dev", dev)
	after := metricsTime(ctx, c, i)
	return fmt.Sprintf("%s; %s; GET /metrics from %s took %v before, %v after", desc, firstLine(show), c.ID(i), before, after), nil
}

func (n *netNemesis) Heal(ctx context.Context, c *Cluster) error {
	var notes []string
	for _, p := range n.probes {
		notes = append(notes, p())
	}
	n.probes = nil
	var errs []error
	for _, i := range n.shaped {
		if out, err := n.lab.Exec(i, "tc", "qdisc", "del", "dev", n.lab.Link(i), "root"); err != nil && !strings.Contains(out, "No such file") && !strings.Contains(out, "Cannot delete qdisc with handle of zero") {
			errs = append(errs, fmt.Errorf("tc qdisc del in %s: %v: %s", n.lab.NS(i), err, out))
		}
		notes = append(notes, c.ID(i)+" qdisc after heal: "+n.lab.qdisc(i))
	}
	n.shaped = nil
	if err := n.lab.Heal(); err != nil {
		errs = append(errs, err)
	}
	n.note = strings.Join(notes, "; ")
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// HealNote is what Heal measured (packets dropped, the qdisc left).
func (n *netNemesis) HealNote() string { return n.note }

// qdisc is the root qdisc of server i's veth, as tc shows it.
func (l *Lab) qdisc(i int) string {
	out, err := l.Exec(i, "tc", "qdisc", "show", "dev", l.Link(i))
	if err != nil {
		return "tc: " + err.Error()
	}
	return firstLine(out)
}

// ruleCounts lists the packets each rule of server i's filter table
// matched: "INPUT DROP 84 packets, OUTPUT ACCEPT 120 packets".
func (l *Lab) ruleCounts(i int) string {
	out, err := l.Exec(i, "iptables", "-w", "5", "-L", "-v", "-n", "-x")
	if err != nil {
		return "iptables: " + err.Error()
	}
	var parts []string
	chain := ""
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "Chain" {
			chain = f[1]
		}
		if len(f) > 2 && (f[2] == "DROP" || f[2] == "ACCEPT") {
			parts = append(parts, chain+" "+f[2]+" "+f[0]+" packets")
		}
	}
	return strings.Join(parts, ", ")
}

// probe says whether server i can open a TCP connection to server j's raft
// port (from i's namespace, 1 s at most): "s1->s2 ok" or "s1->s2 cut".
func (l *Lab) probe(c *Cluster, i, j int) string {
	ok := l.canConnect(i, fmt.Sprintf("%s/%d", l.Host(j), nsPorts[0]))
	s := c.ID(i) + "->" + c.ID(j)
	if ok {
		return s + " ok"
	}
	return s + " cut"
}

func (l *Lab) canConnect(i int, hostPort string) bool {
	_, err := l.Exec(i, "timeout", "1", "bash", "-c", "exec 3<>/dev/tcp/"+hostPort)
	return err == nil
}

// metricsTime is how long GET /metrics on server i takes (a few kB: a
// slowed link shows).
func metricsTime(ctx context.Context, c *Cluster, i int) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+c.nodes[i].http+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	var buf [32 << 10]byte
	for {
		if _, err := resp.Body.Read(buf[:]); err != nil {
			break
		}
	}
	resp.Body.Close()
	return time.Since(t0).Round(time.Millisecond)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
