//go:build unix && !linux

package serverproc

import "syscall"

// SysProcAttr puts the server in a process group of its own. Only Linux has
// Pdeathsig: elsewhere a test binary that dies without running Stop or
// Kill leaves the node running.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
