package fanout

import (
	"context"
	"slices"
)

// Flush waits until every runner has written, skipped or dropped every value
// recorded before the call, or until ctx ends, and then returns ctx.Err().
// A runner that has exited counts as done. Flush does not wait for plain
// watchers (see [Recorder.Watch]). Called from a sink or handler, it waits
// for its own runner, which cannot progress: give it a context that ends.
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
// waiting for them.
func (run *Runner[T]) markHandled(n uint64) {
	run.mu.Lock()
	run.handled += n
	if len(run.waiters) > 0 {
		keep := run.waiters[:0]
		for _, fw := range run.waiters {
			if fw.target <= run.handled {
				close(fw.ch)
			} else {
				keep = append(keep, fw)
			}
		}
		run.waiters = keep
	}
	run.mu.Unlock()
}

// waitHandled waits until the runner has handled target values or exited.
func (run *Runner[T]) waitHandled(ctx context.Context, target uint64) error {
	run.mu.Lock()
	if run.handled >= target {
		run.mu.Unlock()
		return nil
	}
	select {
	case <-run.done:
		run.mu.Unlock()
		return nil
	default:
	}
	ch := make(chan struct{})
	run.waiters = append(run.waiters, flushWaiter{target, ch})
	run.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	run.mu.Lock()
	run.waiters = slices.DeleteFunc(run.waiters, func(fw flushWaiter) bool { return fw.ch == ch })
	run.mu.Unlock()
	return ctx.Err()
}
