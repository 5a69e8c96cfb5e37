//go:build !unix

package debug_test

// cpuTime returns 0: the CPU time is read with getrusage, which only Unix
// has (cpu-ns/op is then 0).
func cpuTime() int64 { return 0 }
