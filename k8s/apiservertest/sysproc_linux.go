package apiservertest

import "syscall"

// sysProcAttr makes the child die with the test binary, so a crashed or
// timed-out test leaves no kube-apiserver or etcd behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
