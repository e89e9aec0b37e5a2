package jepsen

import (
	"log/slog"
	"os/exec"
	"strings"

	"coord/internal/netlab"
)

// Lab is the runner's real network for partitions (internal/netlab): one
// network namespace per server (jpns1, jpns2, ...) on the bridge jp-br0,
// which holds 10.78.0.1, where the runner's clients come from; server i has
// 10.78.0.(11+i). zk/compat's lab uses crd-* and 10.77.0.0/24, so the two
// can exist at once.
type Lab struct{ *netlab.Lab }

// ErrNoLab says namespaces or iptables are not available here (not root, no
// ip or iptables, not permitted); Run falls back to the Proxy.
var ErrNoLab = netlab.ErrUnavailable

// NewLab builds a lab of n namespaces. It returns an error wrapping ErrNoLab
// where that is not permitted. On any error nothing is left behind; on
// success the caller must Close it.
func NewLab(n int, log *slog.Logger) (*Lab, error) {
	l, err := netlab.New(netlab.Config{Prefix: "jp", Subnet: "10.78.0", Lock: "/run/jepsen-netlab.lock"}, n, log)
	if err != nil {
		return nil, err
	}
	return &Lab{l}, nil
}

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
