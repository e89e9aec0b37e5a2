// Package netlab builds a small real network for partition tests and fault
// injection: one network namespace per server, each with a veth pair to a
// Linux bridge in the root namespace, and iptables rules inside the
// namespaces to cut servers off from each other.
//
// A lab touches only its own namespaces, links and one FORWARD rule, all
// named from its Config, so two labs with different names can exist at once.
// A process holds the Config's lock file for as long as its lab exists; the
// kernel drops the lock when a crashed process dies, and the next lab starts
// by removing what a crashed run left behind.
package netlab

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Config names a lab's parts.
type Config struct {
	// Prefix names the namespaces (<Prefix>ns1, ...), the veth pairs
	// (<Prefix>-v1 on the bridge, <Prefix>-v1n in the namespace) and the
	// bridge (<Prefix>-br0).
	Prefix string
	// Subnet is the first three octets of a /24: the bridge holds .1, where
	// the caller's own clients come from; server i has .(11+i).
	Subnet string
	// Lock is the lock file held while the lab exists.
	Lock string
}

// Max is the number of namespaces a lab may have (and a leftover cleanup
// looks for).
const Max = 9

// ErrUnavailable says namespaces or iptables are not available here (not
// root, no ip or iptables, not permitted).
var ErrUnavailable = errors.New("netlab: network namespaces not available")

// Lab is a built lab; Close removes it.
type Lab struct {
	cfg   Config
	log   *slog.Logger
	ns    []string
	hosts []string
	lock  *os.File
}

func (c Config) ns(i int) string   { return fmt.Sprintf("%sns%d", c.Prefix, i+1) }
func (c Config) veth(i int) string { return fmt.Sprintf("%s-v%d", c.Prefix, i+1) }
func (c Config) peer(i int) string { return fmt.Sprintf("%s-v%dn", c.Prefix, i+1) }
func (c Config) host(i int) string { return fmt.Sprintf("%s.%d", c.Subnet, 11+i) }
func (c Config) bridge() string    { return c.Prefix + "-br0" }
func (c Config) root() string      { return c.Subnet + ".1" }

// forward lets traffic between the namespaces cross the root FORWARD chain
// (Docker sets its policy to DROP, and bridged traffic goes through iptables
// when br_netfilter is loaded).
func (c Config) forward() []string {
	return []string{"FORWARD", "-i", c.bridge(), "-o", c.bridge(), "-j", "ACCEPT"}
}

// New builds a lab of n namespaces. It returns an error wrapping
// ErrUnavailable where that is not permitted. On any error nothing is left
// behind; on success the caller must Close it.
func New(cfg Config, n int, log *slog.Logger) (l *Lab, err error) {
	if n > Max {
		return nil, fmt.Errorf("netlab: %d namespaces, at most %d", n, Max)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: not root", ErrUnavailable)
	}
	for _, tool := range []string{"ip", "iptables", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: %v (apt-get install iproute2 iptables)", ErrUnavailable, err)
		}
	}
	l = &Lab{cfg: cfg, log: log}
	if err := l.takeLock(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	l.removeLeftovers()
	if out, err := run("ip", "netns", "add", cfg.ns(0)); err != nil {
		return nil, fmt.Errorf("%w: ip netns add: %v: %s", ErrUnavailable, err, out)
	}
	if out, err := l.forwardRule("-I"); err != nil {
		return nil, fmt.Errorf("%w: iptables: %v: %s", ErrUnavailable, err, out)
	}
	br := cfg.bridge()
	steps := [][]string{
		{"ip", "link", "add", br, "type", "bridge"},
		{"ip", "addr", "add", cfg.root() + "/24", "dev", br},
		{"ip", "link", "set", br, "up"},
	}
	for i := 0; i < n; i++ {
		ns := cfg.ns(i)
		if i > 0 {
			steps = append(steps, []string{"ip", "netns", "add", ns})
		}
		steps = append(steps,
			[]string{"ip", "link", "add", cfg.veth(i), "type", "veth", "peer", "name", cfg.peer(i)},
			[]string{"ip", "link", "set", cfg.peer(i), "netns", ns},
			[]string{"ip", "link", "set", cfg.veth(i), "master", br},
			[]string{"ip", "link", "set", cfg.veth(i), "up"},
			[]string{"ip", "-n", ns, "addr", "add", cfg.host(i) + "/24", "dev", cfg.peer(i)},
			[]string{"ip", "-n", ns, "link", "set", cfg.peer(i), "up"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"})
		l.ns = append(l.ns, ns)
		l.hosts = append(l.hosts, cfg.host(i))
	}
	for _, s := range steps {
		if out, err := run(s[0], s[1:]...); err != nil {
			return nil, fmt.Errorf("netlab: %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	// A closed port in another namespace must answer with a reset at once;
	// silence means the bridge drops their traffic.
	if n > 1 {
		out, err := l.Exec(0, "timeout", "3", "bash", "-c", "exec 3<>/dev/tcp/"+cfg.host(1)+"/9")
		if !strings.Contains(out, "refused") {
			return nil, fmt.Errorf("netlab: %s cannot reach %s across %s (%v: %s); is bridged traffic dropped?", cfg.ns(0), cfg.host(1), br, err, out)
		}
	}
	log.Info("network lab up", "namespaces", n, "bridge", br, "subnet", cfg.root()+"/24")
	return l, nil
}

// Size is the number of namespaces.
func (l *Lab) Size() int { return len(l.ns) }

// NS is server i's namespace, Host its address and Link the name of its
// veth inside the namespace.
func (l *Lab) NS(i int) string   { return l.ns[i] }
func (l *Lab) Host(i int) string { return l.hosts[i] }
func (l *Lab) Link(i int) string { return l.cfg.peer(i) }

// Hosts are the servers' addresses, NSs their namespaces, in server order.
func (l *Lab) Hosts() []string { return append([]string(nil), l.hosts...) }
func (l *Lab) NSs() []string   { return append([]string(nil), l.ns...) }

// Partition cuts the servers into groups: each server drops everything to
// and from the servers of other groups (rules inside its own namespace, so
// clients on the bridge still reach every server). A server in no group
// keeps talking to everyone who talks to it. All rules of a server land at
// once (iptables-restore).
func (l *Lab) Partition(groups [][]int) error {
	group := map[int]int{}
	for g, members := range groups {
		for _, i := range members {
			group[i] = g
		}
	}
	for i := range l.ns {
		gi, ok := group[i]
		var drop []int
		if ok {
			for j := range l.ns {
				if gj, ok := group[j]; ok && gj != gi {
					drop = append(drop, j)
				}
			}
		}
		if err := l.Isolate(i, drop); err != nil {
			return err
		}
	}
	return nil
}

// Heal removes every rule from every namespace.
func (l *Lab) Heal() error {
	var errs []error
	for i := range l.ns {
		errs = append(errs, l.Isolate(i, nil))
	}
	return errors.Join(errs...)
}

// Isolate cuts server i off from the servers in from: everything to and
// from their addresses is dropped inside i's namespace, replacing what was
// there (nil from removes every rule). The bridge side, where the caller's
// clients are, still reaches it.
func (l *Lab) Isolate(i int, from []int) error {
	var b strings.Builder
	for _, j := range from {
		fmt.Fprintf(&b, "-A INPUT -s %s -j DROP\n-A OUTPUT -d %s -j DROP\n", l.hosts[j], l.hosts[j])
	}
	return l.Filter(i, b.String())
}

// Filter replaces the filter table in server i's namespace with rules
// (iptables-restore lines, without the table's header and COMMIT), all at
// once.
func (l *Lab) Filter(i int, rules string) error {
	cmd := exec.Command("ip", "netns", "exec", l.ns[i], "iptables-restore", "-w", "5")
	cmd.Stdin = strings.NewReader("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" + rules + "COMMIT\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netlab: iptables-restore in %s: %v: %s", l.ns[i], err, out)
	}
	return nil
}

// Exec runs a command inside server i's namespace and returns its output.
func (l *Lab) Exec(i int, name string, args ...string) (string, error) {
	return run("ip", append([]string{"netns", "exec", l.ns[i], name}, args...)...)
}

// Close removes the namespaces, links and FORWARD rule and releases the
// lock. It returns an error when something is still there afterwards.
func (l *Lab) Close() error {
	l.removeLeftovers()
	var errs []error
	for i := 0; i < Max; i++ {
		if _, err := os.Stat("/run/netns/" + l.cfg.ns(i)); err == nil {
			errs = append(errs, fmt.Errorf("netlab: namespace %s still there", l.cfg.ns(i)))
		}
	}
	if linkExists(l.cfg.bridge()) {
		errs = append(errs, fmt.Errorf("netlab: bridge %s still there", l.cfg.bridge()))
	}
	if _, err := l.forwardRule("-C"); err == nil {
		errs = append(errs, fmt.Errorf("netlab: FORWARD rule %v still there", l.cfg.forward()))
	}
	if l.lock != nil {
		l.lock.Close() // releases the flock
		l.lock = nil
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.log.Info("network lab removed", "bridge", l.cfg.bridge())
	return nil
}

// takeLock waits (up to five minutes) for another process's lab to go.
func (l *Lab) takeLock() error {
	f, err := os.OpenFile(l.cfg.Lock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return fmt.Errorf("netlab: lock %s: %v", l.cfg.Lock, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	l.lock = f
	return nil
}

// removeLeftovers removes this lab's namespaces, links and FORWARD rule,
// whoever made them (a crashed run), and nothing else.
func (l *Lab) removeLeftovers() {
	for i := 0; i < Max; i++ {
		if _, err := os.Stat("/run/netns/" + l.cfg.ns(i)); err == nil {
			run("ip", "netns", "del", l.cfg.ns(i))
		}
		if linkExists(l.cfg.veth(i)) {
			run("ip", "link", "del", l.cfg.veth(i))
		}
	}
	if linkExists(l.cfg.bridge()) {
		run("ip", "link", "del", l.cfg.bridge())
	}
	for k := 0; k < 10; k++ {
		if _, err := l.forwardRule("-C"); err != nil {
			break
		}
		l.forwardRule("-D")
	}
}

// forwardRule inserts (-I), checks (-C) or deletes (-D) the FORWARD rule.
func (l *Lab) forwardRule(op string) (string, error) {
	return run("iptables", append([]string{"-w", "5", op}, l.cfg.forward()...)...)
}

func linkExists(name string) bool {
	_, err := os.Stat("/sys/class/net/" + name)
	return err == nil
}

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
