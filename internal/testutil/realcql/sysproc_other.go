//go:build unix && !linux

package realcql

import "syscall"

// sysProcAttr puts the JVM in a process group of its own. Only Linux has
// Pdeathsig: elsewhere a test binary that dies without running Stop or
// Kill leaves the node running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
