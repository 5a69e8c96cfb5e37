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

// IdleCPURounds is how many times the idle-CPU group measures the floor and
// each system, in turn, keeping each one's lowest figure: what lands in one
// second of a process that has just run other groups (a full run measured
// fanout's parked watchers, first after the floor and after idle memory's
// 100,000 watchers were torn down, at 6.1 ms/s against a floor of 2.6,
// and at 1.4 against 1.7 run alone) is not the system's idle cost.
const IdleCPURounds = 2

// idleCPUGroup measures the CPU of the harness process alone (the floor),
// then the idle CPU of each system, IdleCPURounds times over, and keeps
// the lowest figure of each.
func idleCPUGroup(cfg Config, _ *Results, systems []System) ([]Case, error) {
	low, err := lowestOfRounds(IdleCPURounds, func() ([]float64, error) {
		v, err := cpuOver(cfg.IdleCPUDuration)
		if err != nil {
			return nil, err
		}
		out := []float64{v}
		for _, s := range systems {
			v, err := measureIdleCPU(s, cfg.IdleCPUWatchers, cfg.IdleCPUDuration)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	cases := []Case{{Kind: KindIdleCPU, Label: FloorLabel, System: "none", Reps: IdleCPURounds, IdleCPUMsPerSec: ptr(low[0])}}
	for i, s := range systems {
		c := newCase(KindIdleCPU, s)
		c.Watchers, c.Reps = cfg.IdleCPUWatchers, IdleCPURounds
		c.IdleCPUMsPerSec = ptr(low[i+1])
		cases = append(cases, c)
	}
	return cases, nil
}

// lowestOfRounds calls round n times and returns, for each position of
// the figures it returns, the lowest of the n.
func lowestOfRounds(n int, round func() ([]float64, error)) ([]float64, error) {
	var low []float64
	for r := range n {
		vs, err := round()
		if err != nil {
			return nil, err
		}
		if r == 0 {
			low = vs
			continue
		}
		for i := range low {
			low[i] = min(low[i], vs[i])
		}
	}
	return low, nil
}
