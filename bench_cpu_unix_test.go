//go:build unix

package fanout_test

import "syscall"

// processCPU returns the process's user and system CPU time so far, in
// nanoseconds, and whether it could tell.
func processCPU() (int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime), true
}
