//go:build !linux

package replica

import "errors"

const snapshotNice = 0

func lowerThreadPriority() error { return errors.New("thread priorities are set on Linux only") }

func threadNice() (int, error) { return 0, errors.New("thread priorities are read on Linux only") }
