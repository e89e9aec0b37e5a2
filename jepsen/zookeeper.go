package jepsen

import (
	"context"

	"coord/internal/zkproc"
)

// ErrNoZooKeeper says java or Debian's zookeeper package is missing.
var ErrNoZooKeeper = zkproc.ErrMissing

// StartZooKeeper runs a standalone Apache ZooKeeper (internal/zkproc) on a
// free loopback port with its data and log under dir, the reference the
// differential mode compares coord with, and waits (bounded by ctx) until it
// serves. TTL nodes are on, and no container or TTL node is reaped while a
// run compares (coord gets -container-check-interval).
func StartZooKeeper(ctx context.Context, dir string) (*zkproc.Ensemble, error) {
	return zkproc.Start(ctx, zkproc.Options{Dir: dir,
		JVM: []string{"-Dzookeeper.extendedTypesEnabled=true", "-Dznode.container.checkIntervalMs=86400000"}})
}
