//go:build !linux

package main

import (
	"os"
	"syscall"
)

// childAttr: only Linux can tie a child's life to its parent's; elsewhere
// coordbench relies on its own cleanup.
func childAttr() *syscall.SysProcAttr { return nil }

// datasync: fsync where there is no fdatasync.
func datasync(f *os.File) error { return f.Sync() }
