package fanout

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/fanout-go/fanout/internal/guard"
)

// Sink stores values for a [Recorder] runner (see [Recorder.StartSink]). The
// runner calls Create for a value seen for the first time and Update for a
// repeat (a [Correlation] with Count > 1), and passes what they return to the
// correlator's [Correlator.Observe]; a sink that stores nothing new may return
// v itself. ctx is cancelled only when [Recorder.Shutdown]'s context ends
// before the runners have finished.
type Sink[T any] interface {
	Create(ctx context.Context, v T) (T, error)
	Update(ctx context.Context, v T) (T, error)
}

// Runner is a consumer started by a [Recorder]: one goroutine that takes the
// recorded values from its own queue, in order, and hands each to a sink or
// a handler.
type Runner[T any] struct {
	r      *Recorder[T]
	w      *Watcher[T]
	name   string
	handle func(*Runner[T], T)
	// ctx ends retry sleeps: cancelled by Stop and by the recorder's
	// Shutdown.
	ctx     context.Context
	cancel  context.CancelFunc
	abandon atomic.Bool
	done    chan struct{}

	received, written, failures, merged atomic.Uint64
	drops                               [numDropReasons]atomic.Uint64

	mu      sync.Mutex
	handled uint64 // values written, skipped or dropped after receipt
	waiters []flushWaiter

	// exited is set, under the recorder's mu, when the runner's counters
	// have moved to the recorder's: later losses go there.
	exited bool
}

// Stop stops the runner: it takes no new values, gives each value still
// queued (and the one in flight) at most one more attempt, without retries,
// and exits. Stop does not wait; see [Runner.Done]. It is idempotent.
func (run *Runner[T]) Stop() {
	run.cancel()
	run.w.Stop()
}

// Done returns a channel that is closed when the runner's goroutine has
// exited.
func (run *Runner[T]) Done() <-chan struct{} { return run.done }

// Stats returns the runner's counters.
func (run *Runner[T]) Stats() RunnerStats {
	ws := run.w.Stats()
	s := RunnerStats{
		Queued:          ws.Queued,
		Received:        run.received.Load(),
		Written:         run.written.Load(),
		Failures:        run.failures.Load(),
		Merged:          run.merged.Load(),
		DroppedFull:     ws.DroppedFull + run.drops[DropFull].Load(),
		DroppedSpam:     run.drops[DropSpam].Load(),
		DroppedRejected: run.drops[DropRejected].Load(),
		DroppedRetries:  run.drops[DropRetries].Load(),
		DroppedShutdown: run.drops[DropShutdown].Load(),
	}
	s.Dropped = s.DroppedFull + s.DroppedSpam + s.DroppedRejected + s.DroppedRetries + s.DroppedShutdown
	return s
}

// RunnerStats is a snapshot of a [Runner]'s counters.
type RunnerStats struct {
	// Queued is the number of values waiting in the runner's queue.
	Queued int
	// Received counts values taken from the queue.
	Received uint64
	// Written counts values the sink stored or the handler took.
	Written uint64
	// Failures counts failed write attempts, retried or not, including
	// those the correlator reports ([LossReporter].Failed).
	Failures uint64
	// Dropped counts values not written, all reasons together.
	Dropped uint64
	// DroppedFull counts values missed because the queue was full, and
	// merged values whose record the correlator's full cache evicted.
	DroppedFull uint64
	// Merged counts values the correlator folded into an earlier record
	// (see [Correlation].Merged); they are not drops. Those it reports
	// lost later (see [LossReporter]) move to a Dropped counter.
	Merged uint64
	// DroppedSpam counts values the spam filter skipped.
	DroppedSpam uint64
	// DroppedRejected counts values whose error was not retryable, or whose
	// sink or handler panicked.
	DroppedRejected uint64
	// DroppedRetries counts values that failed every try.
	DroppedRetries uint64
	// DroppedShutdown counts values given up at shutdown.
	DroppedShutdown uint64
}

func (s *RunnerStats) add(o RunnerStats) {
	s.Queued += o.Queued
	s.Received += o.Received
	s.Written += o.Written
	s.Failures += o.Failures
	s.Dropped += o.Dropped
	s.DroppedFull += o.DroppedFull
	s.Merged += o.Merged
	s.DroppedSpam += o.DroppedSpam
	s.DroppedRejected += o.DroppedRejected
	s.DroppedRetries += o.DroppedRetries
	s.DroppedShutdown += o.DroppedShutdown
}

func (run *Runner[T]) loop() {
	defer run.exit()
	buf := make([]T, 1) // one at a time: the queue length stays exact
	for {
		n, err := run.w.Recv(context.Background(), buf)
		if err != nil {
			return
		}
		for _, v := range buf[:n] {
			run.received.Add(1)
			if run.abandon.Load() {
				run.drop(DropShutdown, nil)
			} else {
				run.handle(run, v)
			}
			run.markHandled()
		}
		clear(buf)
	}
}

func (run *Runner[T]) exit() {
	run.cancel()
	r := run.r
	r.mu.Lock()
	if i := slices.Index(r.runners, run); i >= 0 {
		r.runners = slices.Delete(r.runners, i, i+1)
	}
	st := run.Stats()
	st.Queued = 0
	r.exited.add(st)
	run.exited = true
	r.mu.Unlock()
	run.mu.Lock()
	for _, fw := range run.waiters {
		close(fw.ch)
	}
	run.waiters = nil
	close(run.done) // under run.mu: waitHandled sees either this or adds a waiter closed above
	run.mu.Unlock()
}

func (run *Runner[T]) drop(reason DropReason, err error) {
	run.drops[reason].Add(1)
	run.r.report(Drop{WatcherID: run.w.ID(), WatcherName: run.name, Reason: reason, Err: err}, run)
}

// write correlates v and writes it to sink, retrying per the policy. It
// mirrors client-go's recordToSink: after a failure the tries are counted
// first, then a pause that Stop or Shutdown cut short ends the value.
func (run *Runner[T]) write(sink Sink[T], c SinkCorrelator[T], v T) {
	res, ok := run.correlate(c, v)
	if !ok {
		return
	}
	p := run.r.retry
	for tries := 1; ; tries++ {
		stored, err, perr := run.attempt(sink, res)
		switch {
		case perr != nil:
			run.failures.Add(1)
			run.drop(DropRejected, perr)
			return
		case err == nil:
			run.written.Add(1)
			if c != nil {
				// The value is stored; a correlator function that panics
				// here only loses the repeat's reference.
				_ = guard.Call(func() { c.Observe(stored) })
			}
			return
		}
		run.failures.Add(1)
		if reason, why, stop := run.giveUp(p, err, tries); stop {
			run.drop(reason, why)
			return
		}
		if !run.pause(p, tries) {
			run.drop(DropShutdown, err)
			return
		}
	}
}

// correlate passes v through c and reports whether there is a value to
// write: not when the spam filter skipped it, c merged it, or c panicked.
func (run *Runner[T]) correlate(c SinkCorrelator[T], v T) (Correlation[T], bool) {
	res := Correlation[T]{Value: v, Count: 1}
	if c != nil {
		if err := guard.Call(func() { res = c.Correlate(v) }); err != nil {
			run.drop(DropRejected, err)
			return res, false
		}
	}
	switch {
	case res.Skip:
		run.drop(DropSpam, nil)
		return res, false
	case res.Merged:
		run.merged.Add(1)
		return res, false
	}
	return res, true
}

// giveUp decides, after the write failure number tries, whether to stop
// retrying, why, and the error to report: the policy does not retry err (or
// its classifier panicked), the tries are used up, or the runner is
// stopping.
func (run *Runner[T]) giveUp(p RetryPolicy, err error, tries int) (DropReason, error, bool) {
	retry := true
	if p.Retryable != nil {
		if perr := guard.Call(func() { retry = p.Retryable(err) }); perr != nil {
			return DropRejected, perr, true
		}
	}
	switch {
	case !retry:
		return DropRejected, err, true
	case tries >= p.MaxTries:
		return DropRetries, err, true
	case run.ctx.Err() != nil:
		return DropShutdown, err, true
	}
	return 0, nil, false
}

// pause sleeps before the next try; it reports false if Stop or Shutdown
// cut it short.
func (run *Runner[T]) pause(p RetryPolicy, tries int) bool {
	return guard.Sleep(run.ctx, p.pause(tries))
}

// attempt makes one write: Update for a repeat, Create otherwise. perr
// reports a panic in the sink.
func (run *Runner[T]) attempt(sink Sink[T], res Correlation[T]) (stored T, err, perr error) {
	perr = guard.Call(func() {
		if res.Count > 1 {
			stored, err = sink.Update(run.r.sinkCtx, res.Value)
		} else {
			stored, err = sink.Create(run.r.sinkCtx, res.Value)
		}
	})
	return stored, err, perr
}
