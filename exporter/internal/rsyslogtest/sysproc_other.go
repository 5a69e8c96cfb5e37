//go:build !linux

package rsyslogtest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
