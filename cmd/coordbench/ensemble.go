package main

import (
	"context"
	"fmt"
	"time"
)

// ensemble is a set of server processes coordbench started itself (-local:
// coord, -zookeeper: Apache ZooKeeper), which it can inspect, kill and
// restart.
type ensemble interface {
	size() int
	name(i int) string // server i (1-based) as reports name it: "s1", "zk1"
	alive(i int) bool
	// waitLeader waits until a live server other than not (0: any) leads
	// and the others follow it, and returns its number.
	waitLeader(ctx context.Context, timeout time.Duration, not int) (int, error)
	// isLeader: server i says it is the leader now (one quick poll).
	isLeader(ctx context.Context, i int) bool
	// killAsync sends SIGKILL to server i; the channel closes once it has
	// exited.
	killAsync(i int) <-chan struct{}
	// start starts server i again with its data and returns at once.
	start(i int) error
	// wipe deletes stopped server i's state, as when its disk is replaced,
	// so that its next start begins empty and takes the state from the
	// others, the way that system documents (coord: -rebuild once;
	// ZooKeeper: start with an empty version-2 directory, myid kept).
	wipe(i int) error
	// snapshotCount is how many snapshots server i has written (coord:
	// since it started; ZooKeeper: the files it keeps); takeSnapshot has it
	// write one now (coord only). See snapshots.go.
	snapshotCount(ctx context.Context, i int) int
	takeSnapshot(ctx context.Context, i int) error
	// pastSnapshot is how many raft log entries server i has applied past
	// its newest whole snapshot on disk: what a restart replays after it
	// restores (coord only; ok false otherwise).
	pastSnapshot(ctx context.Context, i int) (entries uint64, ok bool)
	// restart starts server i again with its data and waits until it
	// serves.
	restart(ctx context.Context, i int) error
	// waitCaughtUp waits until server i follows leader and has what leader
	// had when the wait began.
	waitCaughtUp(ctx context.Context, i, leader int, timeout time.Duration) error
	health(ctx context.Context) []serverHealth
	// pid is server i's process id (0 when it is not running).
	pid(i int) int
	// liveHeap is server i's heap in use right after a full collection
	// (coord: the Go heap through pprof; ZooKeeper: the JVM's used heap
	// after jcmd GC.run), 0 when it cannot tell.
	liveHeap(ctx context.Context, i int) int64
	// leaderSessions is the number of sessions the leader knows; -1 when it
	// cannot tell.
	leaderSessions(ctx context.Context) int64
	stop()
	unexpectedExits() []string
}

// bringUp starts every server of e, waits until each serves (up to
// serveWait) and a leader leads (up to leaderWait); on an error it stops
// them all.
func bringUp(ctx context.Context, e interface {
	ensemble
	waitServing(ctx context.Context, i int, timeout time.Duration) error
}, serveWait, leaderWait time.Duration) error {
	err := func() error {
		for i := 1; i <= e.size(); i++ {
			if err := e.start(i); err != nil {
				return err
			}
		}
		for i := 1; i <= e.size(); i++ {
			if err := e.waitServing(ctx, i, serveWait); err != nil {
				return err
			}
		}
		_, err := e.waitLeader(ctx, leaderWait, 0)
		return err
	}()
	if err != nil {
		e.stop()
	}
	return err
}

// coord's local cluster as an ensemble.

func (c *cluster) size() int         { return len(c.procs) }
func (c *cluster) name(i int) string { return fmt.Sprintf("s%d", i) }
func (c *cluster) alive(i int) bool  { return c.procs[i-1] != nil && c.procs[i-1].alive() }

func (c *cluster) pid(i int) int {
	if !c.alive(i) {
		return 0
	}
	return c.procs[i-1].cmd.Process.Pid
}

func (c *cluster) isLeader(ctx context.Context, i int) bool {
	st, err := c.status(ctx, i)
	return err == nil && st.Role == "leader"
}

func (c *cluster) killAsync(i int) <-chan struct{} {
	p := c.procs[i-1]
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	p.cmd.Process.Kill()
	return p.done
}

func (c *cluster) restart(ctx context.Context, i int) error {
	if err := c.start(i); err != nil {
		return err
	}
	return c.waitServing(ctx, i, 30*time.Second)
}

func (c *cluster) leaderSessions(ctx context.Context) int64 {
	for i := range c.procs {
		if !c.alive(i + 1) {
			continue
		}
		st, err := c.status(ctx, i+1)
		if err == nil && st.Role == "leader" {
			return st.Sessions
		}
	}
	return -1
}
