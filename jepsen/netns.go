package jepsen

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

// Lab is a small real network for partitions: one network namespace per
// server (jpns1, jpns2, ...), each with a veth pair to a Linux bridge in the
// root namespace, jp-br0. The bridge holds 10.78.0.1, where the runner's
// clients come from; server i has 10.78.0.(11+i). Only these namespaces,
// links and one FORWARD rule are ever touched (zk/compat's lab uses crd-*
// and 10.77.0.0/24, so the two can exist at once).
//
// A process holds labLock for as long as its lab exists; the kernel drops
// the lock when a crashed runner dies, and the next lab starts by removing
// what a crashed run left behind.
type Lab struct {
	log   *slog.Logger
	ns    []string
	hosts []string
	lock  *os.File
}

const (
	labBridge = "jp-br0"
	labRoot   = "10.78.0.1"
	labMax    = 9
	labLock   = "/run/jepsen-netlab.lock"
)

// ErrNoLab says namespaces or iptables are not available here (not root, no
// ip or iptables, not permitted); Run falls back to the Proxy.
var ErrNoLab = errors.New("jepsen: network namespaces not available")

// labForward lets traffic between the namespaces cross the root FORWARD
// chain (Docker sets its policy to DROP, and bridged traffic goes through
// iptables when br_netfilter is loaded).
var labForward = []string{"FORWARD", "-i", labBridge, "-o", labBridge, "-j", "ACCEPT"}

func labNS(i int) string   { return fmt.Sprintf("jpns%d", i+1) }
func labVeth(i int) string { return fmt.Sprintf("jp-v%d", i+1) }
func labPeer(i int) string { return fmt.Sprintf("jp-v%dn", i+1) }
func labHost(i int) string { return fmt.Sprintf("10.78.0.%d", 11+i) }

// NewLab builds a lab of n namespaces. It returns an error wrapping ErrNoLab
// where that is not permitted. On any error nothing is left behind; on
// success the caller must Close it.
func NewLab(n int, log *slog.Logger) (l *Lab, err error) {
	if n > labMax {
		return nil, fmt.Errorf("jepsen: %d namespaces, at most %d", n, labMax)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: not root", ErrNoLab)
	}
	for _, tool := range []string{"ip", "iptables", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoLab, err)
		}
	}
	l = &Lab{log: log}
	if err := l.takeLock(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	l.removeLeftovers()
	if out, err := run("ip", "netns", "add", labNS(0)); err != nil {
		return nil, fmt.Errorf("%w: ip netns add: %v: %s", ErrNoLab, err, out)
	}
	if out, err := forwardRule("-I"); err != nil {
		return nil, fmt.Errorf("%w: iptables: %v: %s", ErrNoLab, err, out)
	}
	steps := [][]string{
		{"ip", "link", "add", labBridge, "type", "bridge"},
		{"ip", "addr", "add", labRoot + "/24", "dev", labBridge},
		{"ip", "link", "set", labBridge, "up"},
	}
	for i := 0; i < n; i++ {
		ns := labNS(i)
		if i > 0 {
			steps = append(steps, []string{"ip", "netns", "add", ns})
		}
		steps = append(steps,
			[]string{"ip", "link", "add", labVeth(i), "type", "veth", "peer", "name", labPeer(i)},
			[]string{"ip", "link", "set", labPeer(i), "netns", ns},
			[]string{"ip", "link", "set", labVeth(i), "master", labBridge},
			[]string{"ip", "link", "set", labVeth(i), "up"},
			[]string{"ip", "-n", ns, "addr", "add", labHost(i) + "/24", "dev", labPeer(i)},
			[]string{"ip", "-n", ns, "link", "set", labPeer(i), "up"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"})
		l.ns = append(l.ns, ns)
		l.hosts = append(l.hosts, labHost(i))
	}
	for _, s := range steps {
		if out, err := run(s[0], s[1:]...); err != nil {
			return nil, fmt.Errorf("jepsen: lab: %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	// A closed port in another namespace must answer with a reset at once;
	// silence means the bridge drops their traffic.
	if n > 1 {
		out, err := run("ip", "netns", "exec", labNS(0), "timeout", "3", "bash", "-c", "exec 3<>/dev/tcp/"+labHost(1)+"/9")
		if !strings.Contains(out, "refused") {
			return nil, fmt.Errorf("jepsen: lab: %s cannot reach %s across %s (%v: %s)", labNS(0), labHost(1), labBridge, err, out)
		}
	}
	log.Info("network lab up", "namespaces", n, "bridge", labBridge, "subnet", labRoot+"/24")
	return l, nil
}

// Size is the number of namespaces.
func (l *Lab) Size() int { return len(l.ns) }

// NS is server i's namespace; Host its address.
func (l *Lab) NS(i int) string   { return l.ns[i] }
func (l *Lab) Host(i int) string { return l.hosts[i] }

// Partition cuts the servers into groups: each server drops everything to
// and from the servers of other groups (rules inside its own namespace, so
// the runner's clients on the bridge still reach every server). A server in
// no group keeps talking to everyone who talks to it. All rules of a server
// land at once (iptables-restore).
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
		if err := l.isolate(i, drop); err != nil {
			return err
		}
	}
	return nil
}

// Heal removes every partition rule.
func (l *Lab) Heal() error {
	var errs []error
	for i := range l.ns {
		errs = append(errs, l.isolate(i, nil))
	}
	return errors.Join(errs...)
}

func (l *Lab) isolate(i int, from []int) error {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, j := range from {
		fmt.Fprintf(&b, "-A INPUT -s %s -j DROP\n-A OUTPUT -d %s -j DROP\n", l.hosts[j], l.hosts[j])
	}
	b.WriteString("COMMIT\n")
	cmd := exec.Command("ip", "netns", "exec", l.ns[i], "iptables-restore", "-w", "5")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("jepsen: iptables-restore in %s: %v: %s", l.ns[i], err, out)
	}
	return nil
}

// Close removes the namespaces, links and FORWARD rule and releases the
// lock. It returns an error when something is still there afterwards.
func (l *Lab) Close() error {
	l.removeLeftovers()
	var errs []error
	for i := 0; i < labMax; i++ {
		if _, err := os.Stat("/run/netns/" + labNS(i)); err == nil {
			errs = append(errs, fmt.Errorf("jepsen: namespace %s still there", labNS(i)))
		}
	}
	if linkExists(labBridge) {
		errs = append(errs, fmt.Errorf("jepsen: bridge %s still there", labBridge))
	}
	if _, err := forwardRule("-C"); err == nil {
		errs = append(errs, fmt.Errorf("jepsen: FORWARD rule %v still there", labForward))
	}
	if l.lock != nil {
		l.lock.Close()
		l.lock = nil
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.log.Info("network lab removed")
	return nil
}

func (l *Lab) takeLock() error {
	f, err := os.OpenFile(labLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoLab, err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return fmt.Errorf("jepsen: lock %s: %v", labLock, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	l.lock = f
	return nil
}

// removeLeftovers removes this lab's namespaces, links and FORWARD rule,
// whoever made them, and nothing else.
func (l *Lab) removeLeftovers() {
	for i := 0; i < labMax; i++ {
		if _, err := os.Stat("/run/netns/" + labNS(i)); err == nil {
			run("ip", "netns", "del", labNS(i))
		}
		if linkExists(labVeth(i)) {
			run("ip", "link", "del", labVeth(i))
		}
	}
	if linkExists(labBridge) {
		run("ip", "link", "del", labBridge)
	}
	for k := 0; k < 10; k++ {
		if _, err := forwardRule("-C"); err != nil {
			break
		}
		forwardRule("-D")
	}
}

func forwardRule(op string) (string, error) {
	return run("iptables", append([]string{"-w", "5", op}, labForward...)...)
}

func linkExists(name string) bool {
	_, err := os.Stat("/sys/class/net/" + name)
	return err == nil
}

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
