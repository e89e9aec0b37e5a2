package replica

import "syscall"

// threadNice returns the calling thread's nice value.
func threadNice() (int, error) {
	// The raw system call returns 20 - nice.
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	return 20 - p, err
}
