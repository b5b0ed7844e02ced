package serverproc

import "syscall"

// SysProcAttr puts the server in a process group of its own (signals reach it
// and anything it starts) and has the kernel kill it when the thread that
// started it dies, which happens with the test binary.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
