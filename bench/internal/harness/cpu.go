package harness

import (
	"runtime"
	"runtime/debug"
	"syscall"
	"time"
)

// processCPU returns the process's user+system CPU time so far.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)), nil
}

// cpuOver returns the process CPU time spent while sleeping for d, in
// milliseconds per second of wall time. It first returns freed memory to the
// OS so that the runtime's background scavenger has nothing left to do.
func cpuOver(d time.Duration) (float64, error) {
	debug.FreeOSMemory()
	time.Sleep(20 * time.Millisecond)
	c0, err := processCPU()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	time.Sleep(d)
	c1, err := processCPU()
	if err != nil {
		return 0, err
	}
	return float64(c1-c0) / float64(time.Millisecond) / time.Since(t0).Seconds(), nil
}

// measureIdleCPU builds s with n watchers, each with a consumer goroutine,
// publishes a few values (twice the queue, at most 1000) so that every path has run, lets the consumers
// park, and returns the process CPU time spent while nothing is published
// for d, in milliseconds per second of wall time. What the harness itself
// costs while asleep (the Go runtime's background work) is included, so it
// is the floor every system shares.
func measureIdleCPU(s System, n int, d time.Duration) (float64, error) {
	base := runtime.NumGoroutine()
	r, err := s.start(n, 0, nil)
	if err != nil {
		return 0, err
	}
	r.inst.publishN(min(2*s.Queue, 1000))
	v, err := cpuOver(d)
	r.finish()
	settle(base)
	return v, err
}

// FloorLabel labels the idle-CPU case measured with no system at all: the
// CPU the harness process uses by itself while it sleeps.
const FloorLabel = "no system (floor)"

// idleCPUGroup measures the CPU of the harness process alone, then the
// idle CPU of each system once.
func idleCPUGroup(cfg Config, _ *Results, systems []System) ([]Case, error) {
	floor, err := cpuOver(cfg.IdleCPUDuration)
	if err != nil {
		return nil, err
	}
	cases := []Case{{Kind: KindIdleCPU, Label: FloorLabel, System: "none", Reps: 1, IdleCPUMsPerSec: ptr(floor)}}
	for _, s := range systems {
		v, err := measureIdleCPU(s, cfg.IdleCPUWatchers, cfg.IdleCPUDuration)
		if err != nil {
			return nil, err
		}
		c := newCase(KindIdleCPU, s)
		c.Watchers, c.Reps = cfg.IdleCPUWatchers, 1
		c.IdleCPUMsPerSec = ptr(v)
		cases = append(cases, c)
	}
	return cases, nil
}
