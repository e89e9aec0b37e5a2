package main

import "syscall"

// childAttr makes the kernel SIGKILL a server if coordbench itself dies
// without running its cleanup (SIGKILL, a crash), so no server outlives it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
