package jepsen

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// killMajorityNemesis crashes a majority of the voters with SIGKILL (the
// cluster cannot commit until Heal starts them again, all at once).
type killMajorityNemesis struct{ down []int }

func (n *killMajorityNemesis) Name() string { return "kill-majority" }

func (n *killMajorityNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	k := c.Voters()/2 + 1
	n.down = append([]int{}, r.Perm(c.Voters())[:k]...)
	sort.Ints(n.down)
	for _, i := range n.down {
		c.Kill(i)
	}
	var alive []string
	for _, i := range n.down {
		if c.Running(i) {
			alive = append(alive, c.ID(i))
		}
	}
	desc := fmt.Sprintf("kill -9 %s (%d of %d voters)", ids(c, n.down), k, c.Voters())
	if len(alive) > 0 {
		return desc, fmt.Errorf("still running after SIGKILL: %v", alive)
	}
	return desc, nil
}

func (n *killMajorityNemesis) Heal(ctx context.Context, c *Cluster) error {
	var errs []string
	for _, i := range n.down {
		if !c.Running(i) {
			if err := c.Start(i); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	n.down = nil
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// clockNemesis restarts a server in a new Linux time namespace whose
// CLOCK_MONOTONIC and CLOCK_BOOTTIME are offset by ±1..10 minutes, and at
// Heal restarts it again without the offset (a jump back).
//
// What it does not do: jump CLOCK_REALTIME. Time namespaces offset only the
// monotonic and boot clocks, offsets apply when a process starts (so a
// "jump" is a restart), and a Go binary reads the clock through the vDSO,
// which libfaketime's LD_PRELOAD does not reach (checked: faketime -f -2h
// shifts date(1) but not a static Go binary). A wall-clock jump of one
// running coord process needs a hook in coord's session.Clock, which the
// server does not expose.
type clockNemesis struct{ shifted []int }

func (n *clockNemesis) Name() string { return "clock" }

func (n *clockNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	i := r.Intn(c.Size())
	off := 60 + r.Intn(540)
	// A backward offset may not take the clock below zero.
	if up := uptime(); r.Intn(2) == 0 && up > float64(2*off) {
		off = -off
	}
	nd := c.nodes[i]
	c.Kill(i)
	nd.mu.Lock()
	nd.wrap = []string{"unshare", "--time", "--monotonic=" + strconv.Itoa(off), "--boottime=" + strconv.Itoa(off)}
	nd.mu.Unlock()
	n.shifted = append(n.shifted, i)
	desc := fmt.Sprintf("restart %s in a time namespace, monotonic and boot clocks %+ds", c.ID(i), off)
	if err := c.Start(i); err != nil {
		return desc, err
	}
	return desc + "; /proc/<pid>/timens_offsets: " + timensOffsets(c, i), nil
}

func (n *clockNemesis) Heal(ctx context.Context, c *Cluster) error {
	var errs []string
	for _, i := range n.shifted {
		nd := c.nodes[i]
		c.Kill(i)
		nd.mu.Lock()
		nd.wrap = nil
		nd.mu.Unlock()
		if err := c.Start(i); err != nil {
			errs = append(errs, err.Error())
		}
	}
	n.shifted = nil
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Pid is server i's process id, 0 when it is not running.
func (c *Cluster) Pid(i int) int {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if !nd.runningLocked() {
		return 0
	}
	return nd.cmd.Process.Pid
}

// timensOffsets is the time namespace offsets of server i's process, on
// one line. unshare execs coord, so the pid is coord's; the offsets are in
// place once unshare has exec'd, so this waits a little for that.
func timensOffsets(c *Cluster, i int) string {
	var s string
	for k := 0; k < 20; k++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/timens_offsets", c.Pid(i)))
		if err != nil {
			return err.Error()
		}
		s = strings.Join(strings.Fields(string(b)), " ")
		if s != "monotonic 0 0 boottime 0 0" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

func uptime() float64 {
	b, _ := os.ReadFile("/proc/uptime")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
