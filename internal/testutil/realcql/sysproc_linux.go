package realcql

import "syscall"

// sysProcAttr puts the JVM in a process group of its own (signals reach it
// and anything it starts) and has the kernel kill it when the thread that
// started it dies, which happens with the test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
