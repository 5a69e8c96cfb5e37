//go:build !linux

package apiservertest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
