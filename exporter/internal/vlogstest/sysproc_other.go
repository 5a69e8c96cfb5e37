//go:build !linux

package vlogstest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
