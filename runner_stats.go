package fanout

// RunnerStats is a snapshot of a [Runner]'s counters.
type RunnerStats struct {
	// Queued is the number of values waiting in the runner's queue, and,
	// with several writers, those taken from it that wait for their key.
	Queued int
	// InFlight is the number of values being written (or handed to the
	// handler) now: those of the write in flight, and of each writer's.
	InFlight int
	// Received counts values taken from the queue.
	Received uint64
	// Written counts values the sink stored or the handler took.
	Written uint64
	// Failures counts failed write attempts, retried or not, including
	// those the correlator reports ([LossCounter].Failed).
	Failures uint64
	// Retries counts failed write attempts that were tried again.
	Retries uint64
	// Dropped counts values not written, all reasons together.
	Dropped uint64
	// DroppedFull counts values missed because the queue was full, and
	// merged values whose record the correlator's full cache evicted.
	DroppedFull uint64
	// DroppedOldest, DroppedTimeout and DroppedEvicted count values the
	// runner's watcher missed by its full-queue behaviour (see
	// [DropOldest], [DropTimeout], [DropEvicted]); always 0 for a
	// [Recorder]'s runners, whose queues drop new values when full.
	DroppedOldest, DroppedTimeout, DroppedEvicted uint64
	// DroppedPanic counts values lost to a panic: in the watcher's
	// full-queue behaviour, or, for a runner started by [StartBatchSink],
	// in the sink (a [Recorder]'s runners count a panicking sink or
	// handler as DroppedRejected).
	DroppedPanic uint64
	// Merged counts values the correlator folded into an earlier record
	// (see [Correlation].Merged); they are not drops. Those it reports
	// lost later (see [LossCounter]) move to a Dropped counter, so Merged
	// can go down; MergedLost counts them.
	Merged uint64
	// MergedLost counts merged values the correlator reported lost later,
	// moved from Merged to a Dropped counter. Merged + MergedLost, the
	// values ever merged, never goes down: it is what the metrics export
	// as merged (see [Recorder.Metrics]).
	MergedLost uint64
	// DroppedSpam counts values the spam filter skipped.
	DroppedSpam uint64
	// DroppedRejected counts values whose error was not retryable, or whose
	// sink or handler panicked (a recorder's runners).
	DroppedRejected uint64
	// DroppedRetries counts values that failed every try.
	DroppedRetries uint64
	// DroppedShutdown counts values given up at shutdown.
	DroppedShutdown uint64
}

// DroppedBy returns the number of values dropped for reason r; 0 for
// [DropRefused], which a recorder counts in [RecorderStats].Refused.
func (s RunnerStats) DroppedBy(r DropReason) uint64 {
	switch r {
	case DropFull:
		return s.DroppedFull
	case DropOldest:
		return s.DroppedOldest
	case DropTimeout:
		return s.DroppedTimeout
	case DropEvicted:
		return s.DroppedEvicted
	case DropPanic:
		return s.DroppedPanic
	case DropSpam:
		return s.DroppedSpam
	case DropRejected:
		return s.DroppedRejected
	case DropRetries:
		return s.DroppedRetries
	case DropShutdown:
		return s.DroppedShutdown
	}
	return 0
}

func (s *RunnerStats) add(o RunnerStats) {
	s.Queued += o.Queued
	s.InFlight += o.InFlight
	s.Received += o.Received
	s.Written += o.Written
	s.Failures += o.Failures
	s.Retries += o.Retries
	s.Dropped += o.Dropped
	s.DroppedFull += o.DroppedFull
	s.DroppedOldest += o.DroppedOldest
	s.DroppedTimeout += o.DroppedTimeout
	s.DroppedEvicted += o.DroppedEvicted
	s.DroppedPanic += o.DroppedPanic
	s.Merged += o.Merged
	s.MergedLost += o.MergedLost
	s.DroppedSpam += o.DroppedSpam
	s.DroppedRejected += o.DroppedRejected
	s.DroppedRetries += o.DroppedRetries
	s.DroppedShutdown += o.DroppedShutdown
}
