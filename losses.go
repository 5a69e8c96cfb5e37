package fanout

import "sync/atomic"

// LossCounter counts what a [SinkCorrelator] learns about its values after
// Correlate returned: the correlator reports to it, the runner counts. A
// sink runner gives one to a correlator that implements [LossReporting],
// and counts what it is told in its [RunnerStats]; its methods are safe
// for concurrent use, also after the runner has exited.
type LossCounter interface {
	// Lost reports n values that Correlate merged ([Correlation].Merged)
	// and that will now never be written, and why: [DropFull] (their record
	// was evicted from a full cache), [DropRejected] (its final write
	// failed with err), [DropRetries], or [DropShutdown] (it was abandoned,
	// see [Correlator.Purge]). The runner moves them from
	// [RunnerStats].Merged to the reason's Dropped counter and reports
	// each to the recorder's drop handler. Another reason counts as
	// [DropRejected]; n ≤ 0 reports nothing.
	Lost(reason DropReason, n int, err error)
	// Failed reports a failed attempt to write a record outside the
	// runner (see [Correlator.WriteOpen]), counted in
	// [RunnerStats].Failures.
	Failed(err error)
}

// LossReporting is implemented by a [SinkCorrelator] that may lose merged
// values after Correlate returned, as [Correlator] with a merging dedup
// stage does. [Recorder.StartSink] calls ReportLossesTo with the runner's
// [LossCounter] before the runner starts, and fails with the error it
// returns.
type LossReporting interface {
	ReportLossesTo(LossCounter) error
}

var _ LossReporting = (*Correlator[int])(nil)

// runnerLosses is the [LossCounter] a sink runner gives its correlator.
type runnerLosses[T any] struct{ run *Runner[T] }

func (l runnerLosses[T]) Lost(reason DropReason, n int, err error) {
	if n <= 0 {
		return
	}
	switch reason {
	case DropFull, DropRejected, DropRetries, DropShutdown:
	default:
		reason = DropRejected
	}
	run := l.run
	r := run.r
	r.mu.Lock()
	if run.exited {
		r.exited.lose(reason, uint64(n))
	} else {
		// A value the correlator merged may be reported lost before
		// the runner has counted it (addMerged): it is counted lost now
		// and owed, and the runner's count pays the debt instead.
		took := takeAtMost(&run.merged, uint64(n))
		run.mergedOwed.Add(uint64(n) - took)
		run.mergedLost.Add(uint64(n))
		run.drops[reason].Add(uint64(n))
	}
	r.mu.Unlock()
	if r.onDrop != nil || r.logger != nil {
		for range n {
			r.report(Drop{WatcherID: run.w.ID(), WatcherName: run.name, Reason: reason, Err: err}, run)
		}
	}
}

func (l runnerLosses[T]) Failed(error) {
	run := l.run
	r := run.r
	r.mu.Lock()
	if run.exited {
		r.exited.Failures++
	} else {
		run.failures.Add(1)
	}
	r.mu.Unlock()
}

// lose moves n merged values to reason's Dropped counter.
func (s *RunnerStats) lose(reason DropReason, n uint64) {
	took := min(s.Merged, n)
	s.Merged -= took
	s.MergedLost += took
	s.Dropped += n
	switch reason {
	case DropFull:
		s.DroppedFull += n
	case DropRetries:
		s.DroppedRetries += n
	case DropShutdown:
		s.DroppedShutdown += n
	default:
		s.DroppedRejected += n
	}
}

// takeAtMost subtracts n from c, stopping at zero, and returns what it
// subtracted.
func takeAtMost(c *atomic.Uint64, n uint64) uint64 {
	for {
		old := c.Load()
		if took := min(old, n); c.CompareAndSwap(old, old-took) {
			return took
		}
	}
}
