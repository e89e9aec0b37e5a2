//go:build !linux

package replica

import "errors"

func threadNice() (int, error) { return 0, errors.New("thread priorities are read on Linux only") }
