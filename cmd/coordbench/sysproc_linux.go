package main

import (
	"os"
	"syscall"
	"time"

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

// freshPageCost maps n bytes of anonymous memory, writes one byte in each
// 4 KiB page and returns the time per page: what the machine charges for
// memory a process touches for the first time. A restore at 10M znodes
// touches about 3 GB so, and on a VM whose page faults reach the
// hypervisor that cost (~11 us a page on some days here, against well
// under 1 us on bare metal) can be most of a restart.
func freshPageCost(n int) (time.Duration, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(b)
	start := time.Now()
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return time.Since(start) / time.Duration((n+4095)/4096), nil
}
