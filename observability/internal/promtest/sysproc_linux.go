package promtest

import "syscall"

// dieWithParent makes the process get SIGKILL when the test binary dies.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
