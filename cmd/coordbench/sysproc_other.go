//go:build !linux

package main

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// childAttr: only Linux can tie a child's life to its parent's; elsewhere
// coordbench relies on its own cleanup.
func childAttr() *syscall.SysProcAttr { return nil }

// datasync: fsync where there is no fdatasync.
func datasync(f *os.File) error { return f.Sync() }

// freshPageCost is measured on Linux only.
func freshPageCost(n int) (time.Duration, error) {
	return 0, errors.New("the fresh-memory probe runs on Linux only")
}
