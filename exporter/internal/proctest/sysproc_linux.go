package proctest

import "syscall"

// sysProcAttr makes the server die with the test binary, so that a crashed
// or timed-out test leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
