package fanout

import (
	"context"
	"io"
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
// before the runners have finished. A panic in Create or Update drops that
// value, counted; a call that never returns holds its runner (or writer)
// until it does, Shutdown's bound excepted; one that ends its goroutine
// (runtime.Goexit: t.FailNow or t.Fatal in a test's sink, which package
// testing allows only on the test's goroutine) is not supported: the value
// it held is not counted, and with several writers Flush waits for it.
type Sink[T any] interface {
	Create(ctx context.Context, v T) (T, error)
	Update(ctx context.Context, v T) (T, error)
}

// Runner is a consumer of one watcher: one goroutine that takes the values
// from the watcher's queue, in order, and hands them to a sink or a
// handler, retrying failed writes per its [RetryPolicy]. A [Recorder]
// starts runners on its own watchers ([Recorder.StartSink],
// [Recorder.StartHandler], [Recorder.StartSlog]); [StartBatchSink] starts
// one on a watcher of any broadcaster, writing batches to a [BatchSink].
// Both kinds share one write loop, one retry policy and one set of
// [DropReason]s.
type Runner[T any] struct {
	r     *Recorder[T] // nil for a runner started by StartBatchSink
	w     *Watcher[T]
	name  string
	batch int
	retry RetryPolicy
	// newHandler returns the function that writes (or hands to the
	// handler) a batch of values, with scratch state of its own: one per
	// writer.
	newHandler func() handler[T]
	hooks      runnerHooks[T]
	picked     []T // scratch space of the Select hook, owned by the goroutine that takes from the queue
	// kw runs the writes on several writers, in order per key; nil for
	// one writer, the runner's goroutine (see keyed.go).
	kw *keyedWriters[T]
	// cut is set once a batch lost values to the runner's stop
	// (DropShutdown): from then on Finished is not called, so that a
	// checkpoint never passes values a restart would write. Owned by the
	// goroutine that reports finished batches (the runner's, or the
	// keyed writers' settler).
	cut bool
	// panicAs is the reason a sink or handler panic is counted under:
	// DropRejected for a recorder's runners (as documented in
	// RunnerStats), DropPanic for batch runners.
	panicAs DropReason
	// ctx ends retry pauses: cancelled by Stop, by the recorder's
	// Shutdown, or when a batch runner's context ends. sinkCtx is passed
	// to the sink; once it has ended, the runner drops what it receives
	// as DropShutdown.
	ctx, sinkCtx context.Context
	cancel       context.CancelFunc
	stopOnEnd    func() bool // a batch runner's context.AfterFunc, nil otherwise
	done         chan struct{}

	received, written, failures, retries, merged atomic.Uint64
	inflight                                     atomic.Int64 // values being written
	mergedLost                                   atomic.Uint64
	// mergedOwed counts merged values reported lost before the runner
	// counted them (see runnerLosses.Lost and addMerged).
	mergedOwed atomic.Uint64
	drops      [numDropReasons]atomic.Uint64

	// handled counts the values written, skipped or dropped after
	// receipt; waiters are the Flush calls waiting for more, under mu, and
	// nwaiters their number (see markHandled).
	handled  atomic.Uint64
	nwaiters atomic.Int32
	mu       sync.Mutex
	waiters  []flushWaiter

	// exited is set, under the recorder's mu, when the runner's counters
	// have moved to the recorder's: later losses go there.
	exited bool
}

// handler writes a batch of values the runner took (and its Select hook
// kept), or hands them to a handler, and reports whether values were lost
// to the runner's stop ([DropShutdown]).
type handler[T any] func(batch []T) (cut bool)

// runnerHooks are a batch runner's callbacks (see [BatchConfig]).
type runnerHooks[T any] struct {
	sel      func(received, out []T) []T
	finished func(received []T)
	onDrop   func(d Drop, values []T)
	onRetry  func(pending []T, failures int, err error)
}

// Stop stops the runner: it takes no new values, gives each value still
// queued (and the one in flight) at most one more attempt, without retries,
// and exits. Stop does not wait; see [Runner.Done]. It is idempotent.
func (run *Runner[T]) Stop() {
	run.cancel()
	run.w.Stop()
}

// Drain stops the runner taking new values, as Stop does, but lets it
// write the values still queued, and the one in flight, as usual, retries
// included, before it exits: how client-go's event sinks end when their
// watch is stopped. Stop, or the recorder's Shutdown, during a Drain cuts
// the retries short. Drain does not wait; see [Runner.Done]. It is
// idempotent.
func (run *Runner[T]) Drain() { run.w.Stop() }

// Done returns a channel that is closed when the runner's goroutine has
// exited.
func (run *Runner[T]) Done() <-chan struct{} { return run.done }

// Stats returns the runner's counters.
func (run *Runner[T]) Stats() RunnerStats {
	ws := run.w.Stats()
	s := RunnerStats{
		Queued:          ws.Queued,
		InFlight:        int(run.inflight.Load()),
		Received:        run.received.Load(),
		Written:         run.written.Load(),
		Failures:        run.failures.Load(),
		Retries:         run.retries.Load(),
		Merged:          run.merged.Load(),
		MergedLost:      run.mergedLost.Load(),
		DroppedFull:     ws.DroppedFull + run.drops[DropFull].Load(),
		DroppedOldest:   ws.DroppedOldest,
		DroppedTimeout:  ws.DroppedTimeout,
		DroppedEvicted:  ws.DroppedEvicted,
		DroppedPanic:    ws.DroppedPanic + run.drops[DropPanic].Load(),
		DroppedSpam:     run.drops[DropSpam].Load(),
		DroppedRejected: run.drops[DropRejected].Load(),
		DroppedRetries:  run.drops[DropRetries].Load(),
		DroppedShutdown: run.drops[DropShutdown].Load(),
	}
	if run.kw != nil {
		s.Queued += int(run.kw.queued.Load())
	}
	s.Dropped = s.DroppedFull + s.DroppedOldest + s.DroppedTimeout + s.DroppedEvicted + s.DroppedPanic +
		s.DroppedSpam + s.DroppedRejected + s.DroppedRetries + s.DroppedShutdown
	return s
}

func (run *Runner[T]) loop() {
	defer run.exit()
	if run.kw != nil {
		run.kw.dispatch()
		return
	}
	handle := run.newHandler()
	buf := make([]T, run.batch) // a recorder's runners take one at a time: the queue length stays exact
	for {
		n, err := run.w.Recv(context.Background(), buf)
		if err != nil {
			return
		}
		run.received.Add(uint64(n))
		run.inflight.Store(int64(n))
		run.take(buf[:n], handle)
		run.inflight.Store(0)
		run.markHandled(uint64(n))
		clear(buf[:n])
		clear(run.picked)
	}
}

// take writes the values of received that the Select hook keeps, with
// handle, on the runner's one writer, and reports the batch finished.
// Once the runner's context has ended, they are dropped as DropShutdown.
func (run *Runner[T]) take(received []T, handle handler[T]) {
	shutdown := run.sinkCtx.Err() != nil
	if vs, ok := run.pick(received); ok {
		if shutdown {
			run.drop(DropShutdown, vs, nil)
		} else if handle(vs) {
			run.cut = true
		}
	}
	if shutdown {
		run.cut = true
	}
	run.finish(received)
}

// addMerged counts a value the correlator merged, or pays one owed: a
// value reported lost, and counted so, before it was counted merged.
func (run *Runner[T]) addMerged() {
	if run.mergedOwed.Load() == 0 || takeAtMost(&run.mergedOwed, 1) == 0 { // a load, usually: no debt
		run.merged.Add(1)
	}
}

// pick returns the values of received that the runner writes: those its
// Select hook keeps, or all. A panic in Select drops them all
// ([DropPanic]): which were to be written is not known. ok is false then.
func (run *Runner[T]) pick(received []T) (vs []T, ok bool) {
	if run.hooks.sel == nil {
		return received, true
	}
	if err := guard.Call(func() { run.picked = run.hooks.sel(received, run.picked[:0]) }); err != nil {
		run.w.b.countPanic()
		run.drop(DropPanic, received, err)
		return nil, false
	}
	return run.picked, true
}

// finish calls the Finished hook with a batch the runner is done with,
// unless this batch or an earlier one lost values to the runner's stop
// (cut): a checkpoint must not pass values a restart would write. A panic
// in Finished is counted in the broadcaster's Panics and loses nothing.
func (run *Runner[T]) finish(received []T) {
	if run.hooks.finished == nil || run.cut {
		return
	}
	if err := guard.Call(func() { run.hooks.finished(received) }); err != nil {
		run.w.b.countPanic()
	}
}

func (run *Runner[T]) exit() {
	run.cancel()
	if run.stopOnEnd != nil {
		run.stopOnEnd()
	}
	if r := run.r; r != nil {
		r.mu.Lock()
		if i := slices.Index(r.runners, run); i >= 0 {
			r.runners = slices.Delete(r.runners, i, i+1)
		}
		st := run.Stats()
		st.Queued, st.InFlight = 0, 0
		r.exited.add(st)
		run.exited = true
		r.mu.Unlock()
	}
	run.mu.Lock()
	for _, fw := range run.waiters {
		close(fw.ch)
	}
	run.waiters = nil
	run.nwaiters.Store(0)
	close(run.done) // under run.mu: waitHandled sees either this or adds a waiter closed above
	run.mu.Unlock()
}

// drop counts vs as dropped for reason and reports them: one report per
// value to the recorder's drop handler, or one call of a batch runner's
// OnDrop.
func (run *Runner[T]) drop(reason DropReason, vs []T, err error) {
	if len(vs) == 0 {
		return
	}
	run.drops[reason].Add(uint64(len(vs)))
	d := Drop{WatcherID: run.w.ID(), WatcherName: run.name, Reason: reason, Err: err}
	if run.r != nil {
		for range vs {
			run.r.report(d, run)
		}
	}
	if run.hooks.onDrop != nil {
		_ = guard.Call(func() { run.hooks.onDrop(d, vs) })
	}
}

// writeBatch writes batch to sink, retrying per the runner's policy, and
// returns how many values were stored, and whether values were dropped
// because the runner is stopping (DropShutdown). A write that stores some values
// resets the count of tries for the rest. A value the sink rejects (an
// error the policy does not retry) or panics on is dropped alone and the
// rest is written; when the tries are used up, or Stop or the end of the
// runner's context cuts a pause short, the rest is dropped. It mirrors
// client-go's recordToSink: after a failure the tries are counted first,
// then the pause.
func (run *Runner[T]) writeBatch(sink BatchSink[T], batch []T) (stored int, cut bool) {
	tries := 0
	for len(batch) > 0 {
		n, err, perr := run.attempt(sink, batch)
		if n > 0 {
			run.written.Add(uint64(n))
			stored += n
			batch, tries = batch[n:], 0
		}
		if len(batch) == 0 { // all stored, whatever the error says
			if err != nil {
				run.failures.Add(1)
			}
			return stored, false
		}
		switch {
		case perr != nil:
			run.failures.Add(1)
			run.drop(run.panicAs, batch[:1], perr)
			batch, tries = batch[1:], 0
			continue
		case err == nil:
			continue
		}
		run.failures.Add(1)
		tries++
		if reason, why, stop := run.giveUp(err, tries); stop {
			if reason == DropRejected {
				run.drop(reason, batch[:1], why)
				batch, tries = batch[1:], 0
				continue
			}
			run.drop(reason, batch, why)
			return stored, reason == DropShutdown
		}
		run.retries.Add(1)
		if run.hooks.onRetry != nil {
			_ = guard.Call(func() { run.hooks.onRetry(batch, tries, err) })
		}
		if !guard.Sleep(run.ctx, run.retry.pause(tries)) {
			run.drop(DropShutdown, batch, err)
			return stored, true
		}
	}
	return stored, false
}

// giveUp decides, after the write failure number tries, whether to stop
// retrying, why, and the error to report: the policy does not retry err (or
// its classifier panicked), the tries are used up, or the runner is
// stopping.
func (run *Runner[T]) giveUp(err error, tries int) (DropReason, error, bool) {
	p := run.retry
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
	case run.ctx.Err() != nil || run.sinkCtx.Err() != nil:
		// sinkCtx too: a batch runner's ctx is a child of it, cancelled
		// a moment after it, and a write that ended because sinkCtx did
		// is no failure to retry (nor to report to OnRetry).
		return DropShutdown, err, true
	}
	return 0, nil, false
}

// attempt makes one write of batch. n is how many values, from the start,
// the sink stored; a short write without an error is [io.ErrShortWrite].
// perr reports a panic in the sink.
func (run *Runner[T]) attempt(sink BatchSink[T], batch []T) (n int, err, perr error) {
	perr = guard.Call(func() { n, err = sink.Write(run.sinkCtx, batch) })
	if perr != nil {
		return 0, nil, perr
	}
	n = min(max(n, 0), len(batch))
	if err == nil && n < len(batch) {
		err = io.ErrShortWrite
	}
	return n, err, nil
}
