//go:build !unix

package fanout_test

// processCPU cannot tell the process's CPU time here.
func processCPU() (int64, bool) { return 0, false }
