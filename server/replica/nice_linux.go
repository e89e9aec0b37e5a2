package replica

import "syscall"

// snapshotNice is the nice value of the thread that writes a snapshot.
const snapshotNice = 10

// lowerThreadPriority sets the calling thread's nice value to snapshotNice
// (on Linux, PRIO_PROCESS with a thread id names that thread alone).
func lowerThreadPriority() error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), snapshotNice)
}
