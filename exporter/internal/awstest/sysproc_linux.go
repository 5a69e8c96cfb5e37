package awstest

import "syscall"

// sysProcAttr makes the emulator die with the test binary, so that a crashed
// or timed-out test leaves no emulator behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
