//go:build !linux

package main

import "syscall"

// childAttr: only Linux can tie a child's life to its parent's; elsewhere
// coordbench relies on its own cleanup.
func childAttr() *syscall.SysProcAttr { return nil }
