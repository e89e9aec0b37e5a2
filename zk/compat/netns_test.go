package compat

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"coord/internal/netlab"
)

// netLab is a small real network for partition tests (internal/netlab):
// one network namespace per server (crdns1, crdns2, ...) on the bridge
// crd-br0, which holds 10.77.0.1, the address the test's own clients come
// from; server i has 10.77.0.(11+i). jepsen's lab uses jp-* and
// 10.78.0.0/24, so the two can exist at once.
//
// A test binary holds the lab's lock for as long as its lab exists, so two
// test binaries (say, the coord and the ZooKeeper target run at once) take
// turns rather than tear down each other's lab.
type netLab struct {
	t   testing.TB
	lab *netlab.Lab
	ns  []string // network namespace of server i
	// hosts are the servers' addresses, inside their namespaces.
	hosts []string
}

// newNetLab builds a lab of n namespaces and removes it when the test ends,
// failed or not. It skips the test where namespaces or iptables are not
// permitted (not root, no CAP_NET_ADMIN, no ip or iptables).
func newNetLab(t testing.TB, n int) *netLab {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	lab, err := netlab.New(netlab.Config{Prefix: "crd", Subnet: "10.77.0", Lock: "/run/crd-netlab.lock"}, n, log)
	if errors.Is(err, netlab.ErrUnavailable) {
		t.Skipf("network partition test: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Errorf("after teardown: %v", err)
		}
	})
	return &netLab{t: t, lab: lab, ns: lab.NSs(), hosts: lab.Hosts()}
}

// isolate cuts server i off from the servers in from; the root side, where
// the test's clients are, still reaches it.
func (l *netLab) isolate(i int, from []int) {
	l.t.Helper()
	if err := l.lab.Isolate(i, from); err != nil {
		l.t.Fatal(err)
	}
}

// heal removes every rule isolate put in server i's namespace.
func (l *netLab) heal(i int) { l.isolate(i, nil) }

// testWriter shows the lab's log lines in the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
