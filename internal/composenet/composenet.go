// Package composenet picks what a docker-compose project of coord needs
// from the host and finds free: a /24 subnet no Docker network uses and a
// host port prefix (docker-compose.yml maps server N's ports to
// <prefix>N180, <prefix>N181 and <prefix>N182). Tests that start such a
// project (deploy's, jepsen's) each take their own.
package composenet

import (
	"fmt"
	"math/rand"
	"net"
	"os/exec"
	"strings"
)

// FreeSubnet returns the first three octets of a /24 in 10.<second>.0.0/16
// that no Docker network uses, picked at random by r.
func FreeSubnet(second byte, r *rand.Rand) (string, error) {
	used := map[byte]bool{}
	ids, _ := exec.Command("docker", "network", "ls", "-q").Output()
	for _, id := range strings.Fields(string(ids)) {
		out, _ := exec.Command("docker", "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}} {{end}}", id).Output()
		for _, sub := range strings.Fields(string(out)) {
			if _, n, err := net.ParseCIDR(sub); err == nil {
				if ip := n.IP.To4(); ip != nil && ip[0] == 10 && ip[1] == second {
					used[ip[2]] = true
				}
			}
		}
	}
	for i := 0; i < 100; i++ {
		if c := byte(r.Intn(250) + 1); !used[c] {
			return fmt.Sprintf("10.%d.%d", second, c), nil
		}
	}
	return "", fmt.Errorf("composenet: no free 10.%d.x.0/24 subnet", second)
}

// FreePortPrefix returns the first of prefixes whose twelve host ports
// (servers 1 to 4, ports x180-x182) are all free on 127.0.0.1.
func FreePortPrefix(prefixes ...string) (string, error) {
	for _, p := range prefixes {
		if portsFree(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("composenet: no free host port prefix among %s", strings.Join(prefixes, ", "))
}

func portsFree(prefix string) bool {
	for n := 1; n <= 4; n++ {
		for _, k := range []string{"180", "181", "182"} {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%s%d%s", prefix, n, k))
			if err != nil {
				return false
			}
			l.Close()
		}
	}
	return true
}
