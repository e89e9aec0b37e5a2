package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// childAttr makes the kernel SIGKILL a server if coordbench itself dies
// without running its cleanup (SIGKILL, a crash), so no server outlives it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// datasync is fdatasync: the file's data, and its metadata only where
// reading the data needs it.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
