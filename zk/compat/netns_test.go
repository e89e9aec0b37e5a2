package compat

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// netLab is a small real network for partition tests: one network
// namespace per server (crdns1, crdns2, ...), each with a veth pair to a
// Linux bridge in this (the root) namespace, crd-br0. The bridge holds
// 10.77.0.1, the address the test's own clients come from; server i has
// 10.77.0.(11+i). Only these namespaces, links and the one FORWARD rule
// below are ever touched.
//
// A test binary takes labLock for as long as its lab exists, so two test
// binaries (say, the coord and the ZooKeeper target run at once) take turns
// rather than tear down each other's lab; the kernel drops the lock when a
// crashed binary dies, and the next lab starts by removing what a crashed
// run left behind.
type netLab struct {
	t     testing.TB
	ns    []string // network namespace of server i
	hosts []string // address of server i, inside its namespace
	lock  *os.File
}

const (
	labBridge = "crd-br0"
	labRoot   = "10.77.0.1" // the bridge's address: where the test's clients come from
	labMax    = 9           // namespaces a lab may have (and a leftover cleanup looks for)
	labLock   = "/run/crd-netlab.lock"
)

// labForward lets traffic between the namespaces cross the root
// namespace's FORWARD chain (bridged traffic goes through iptables when
// br_netfilter is loaded, and Docker sets that chain's policy to DROP).
var labForward = []string{"FORWARD", "-i", labBridge, "-o", labBridge, "-j", "ACCEPT"}

func labNS(i int) string   { return fmt.Sprintf("crdns%d", i+1) }
func labVeth(i int) string { return fmt.Sprintf("crd-v%d", i+1) }     // root side, on the bridge
func labPeer(i int) string { return fmt.Sprintf("crd-v%dn", i+1) }    // namespace side
func labHost(i int) string { return fmt.Sprintf("10.77.0.%d", 11+i) } // server i's address

// newNetLab builds a lab of n namespaces and removes it when the test ends,
// failed or not. It skips the test where namespaces or iptables are not
// permitted (not root, no CAP_NET_ADMIN, no ip or iptables).
func newNetLab(t testing.TB, n int) *netLab {
	t.Helper()
	if n > labMax {
		t.Fatalf("netLab: %d namespaces, at most %d", n, labMax)
	}
	if os.Geteuid() != 0 {
		t.Skip("network partition test needs root (ip netns, iptables)")
	}
	for _, tool := range []string{"ip", "iptables", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("network partition test needs %s (apt-get install iproute2 iptables): %v", tool, err)
		}
	}
	l := &netLab{t: t}
	l.takeLock()
	// Registered before anything is built, so a failure half-way still
	// removes what was made.
	t.Cleanup(l.teardown)
	l.removeLeftovers()

	if out, err := run("ip", "netns", "add", labNS(0)); err != nil {
		t.Skipf("network partition test: ip netns add is not permitted here: %v: %s", err, out)
	}
	if out, err := forwardRule("-I"); err != nil {
		t.Skipf("network partition test: iptables is not permitted here: %v: %s", err, out)
	}
	l.must("ip", "link", "add", labBridge, "type", "bridge")
	l.must("ip", "addr", "add", labRoot+"/24", "dev", labBridge)
	l.must("ip", "link", "set", labBridge, "up")
	for i := 0; i < n; i++ {
		ns := labNS(i)
		if i > 0 {
			l.must("ip", "netns", "add", ns)
		}
		l.must("ip", "link", "add", labVeth(i), "type", "veth", "peer", "name", labPeer(i))
		l.must("ip", "link", "set", labPeer(i), "netns", ns)
		l.must("ip", "link", "set", labVeth(i), "master", labBridge)
		l.must("ip", "link", "set", labVeth(i), "up")
		l.must("ip", "-n", ns, "addr", "add", labHost(i)+"/24", "dev", labPeer(i))
		l.must("ip", "-n", ns, "link", "set", labPeer(i), "up")
		l.must("ip", "-n", ns, "link", "set", "lo", "up")
		l.ns = append(l.ns, ns)
		l.hosts = append(l.hosts, labHost(i))
	}
	// One probe between two namespaces: a closed port must answer with a
	// reset at once; silence means the bridge drops their traffic.
	if n > 1 {
		start := time.Now()
		out, err := run("ip", "netns", "exec", labNS(0), "timeout", "3", "bash", "-c", "exec 3<>/dev/tcp/"+labHost(1)+"/9")
		if strings.Contains(out, "refused") {
			t.Logf("netLab: %d namespaces on %s (%s/24) up; %s reaches %s in %v", n, labBridge, labRoot, labNS(0), labHost(1), time.Since(start).Round(time.Millisecond))
		} else {
			t.Fatalf("netLab: %s cannot reach %s across %s (%v: %s); is bridged traffic dropped?", labNS(0), labHost(1), labBridge, err, out)
		}
	}
	return l
}

// takeLock waits (up to five minutes) for any other test binary's lab to go.
func (l *netLab) takeLock() {
	f, err := os.OpenFile(labLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		l.t.Skipf("network partition test: %v", err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			l.t.Fatalf("netLab: lock %s: %v", labLock, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	l.lock = f
}

// removeLeftovers removes this lab's namespaces, links and FORWARD rule,
// whoever made them (a crashed run), and nothing else.
func (l *netLab) removeLeftovers() {
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

func (l *netLab) teardown() {
	l.removeLeftovers()
	for i := 0; i < labMax; i++ {
		if _, err := os.Stat("/run/netns/" + labNS(i)); err == nil {
			l.t.Errorf("netLab: namespace %s still there after teardown", labNS(i))
		}
	}
	if linkExists(labBridge) {
		l.t.Errorf("netLab: bridge %s still there after teardown", labBridge)
	}
	if _, err := forwardRule("-C"); err == nil {
		l.t.Errorf("netLab: FORWARD rule %v still there after teardown", labForward)
	}
	if l.lock != nil {
		l.lock.Close() // releases the flock
	}
}

// isolate cuts server i off from the servers in from (everything to and from
// their addresses is dropped inside i's namespace); the root side, where
// the test's clients are, still reaches it. All rules land at once.
func (l *netLab) isolate(i int, from []int) {
	l.t.Helper()
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, j := range from {
		fmt.Fprintf(&b, "-A INPUT -s %s -j DROP\n-A OUTPUT -d %s -j DROP\n", l.hosts[j], l.hosts[j])
	}
	b.WriteString("COMMIT\n")
	l.restore(i, b.String())
}

// heal removes every rule isolate put in server i's namespace.
func (l *netLab) heal(i int) {
	l.t.Helper()
	l.restore(i, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n")
}

// restore replaces the filter table of server i's namespace.
func (l *netLab) restore(i int, rules string) {
	l.t.Helper()
	cmd := exec.Command("ip", "netns", "exec", l.ns[i], "iptables-restore", "-w", "5")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		l.t.Fatalf("iptables-restore in %s: %v: %s\n%s", l.ns[i], err, out, rules)
	}
}

func (l *netLab) must(name string, args ...string) {
	l.t.Helper()
	if out, err := run(name, args...); err != nil {
		l.t.Fatalf("netLab: %s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// forwardRule inserts (-I), checks (-C) or deletes (-D) labForward.
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
