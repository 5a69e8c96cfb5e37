package fanout

import (
	"context"
	"slices"
)

// Flush waits until every runner has written, skipped or dropped every value
// recorded before the call, or until ctx ends, and then returns ctx.Err().
// A runner that has exited counts as done. Flush does not wait for plain
// watchers (see [Recorder.Watch]). Called from a sink, a handler or a drop
// handler ([WithDropHandler]: runners call it), it waits for its own
// runner, which cannot progress: give it a context that ends.
func (r *Recorder[T]) Flush(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	type mark struct {
		run    *Runner[T]
		target uint64
	}
	r.mu.Lock()
	marks := make([]mark, len(r.runners))
	for i, run := range r.runners {
		marks[i] = mark{run, run.w.backlog()}
	}
	r.mu.Unlock()
	for _, m := range marks {
		if err := m.run.waitHandled(ctx, m.target); err != nil {
			return err
		}
	}
	return nil
}

type flushWaiter struct {
	target uint64
	ch     chan struct{}
}

// markHandled counts n more values handled and wakes the Flush calls
// waiting for them. Only the runner's goroutine calls it (with several
// writers, the one settling: keyedWriters.settle). It takes run.mu
// only when a Flush waits: it adds to handled before it looks at nwaiters,
// and a Flush counts itself in nwaiters before it looks at handled again,
// so one of them sees the other. With one value per read (a recorder's
// runners), the lock was a tenth of a runner's time per value.
func (run *Runner[T]) markHandled(n uint64) {
	run.handled.Add(n)
	if run.nwaiters.Load() == 0 {
		return
	}
	run.mu.Lock()
	handled := run.handled.Load()
	keep := run.waiters[:0]
	for _, fw := range run.waiters {
		if fw.target <= handled {
			close(fw.ch)
		} else {
			keep = append(keep, fw)
		}
	}
	clear(run.waiters[len(keep):])
	run.waiters = keep
	run.nwaiters.Store(int32(len(keep)))
	run.mu.Unlock()
}

// waitHandled waits until the runner has handled target values or exited.
func (run *Runner[T]) waitHandled(ctx context.Context, target uint64) error {
	if run.handled.Load() >= target {
		return nil
	}
	run.mu.Lock()
	select {
	case <-run.done:
		run.mu.Unlock()
		return nil
	default:
	}
	ch := make(chan struct{})
	run.waiters = append(run.waiters, flushWaiter{target, ch})
	run.nwaiters.Store(int32(len(run.waiters)))
	if run.handled.Load() >= target { // handled before markHandled could see us
		run.forget(ch)
		run.mu.Unlock()
		return nil
	}
	run.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	run.mu.Lock()
	run.forget(ch)
	run.mu.Unlock()
	return ctx.Err()
}

// forget removes the Flush waiting on ch. Caller holds run.mu.
func (run *Runner[T]) forget(ch chan struct{}) {
	run.waiters = slices.DeleteFunc(run.waiters, func(fw flushWaiter) bool { return fw.ch == ch })
	run.nwaiters.Store(int32(len(run.waiters)))
}
