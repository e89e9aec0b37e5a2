//go:build !linux

package replica

import "errors"

const snapshotNice = 0

func lowerThreadPriority() error { return errors.New("thread priorities are set on Linux only") }
