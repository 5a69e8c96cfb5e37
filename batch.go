package fanout

import (
	"context"
	"errors"
	"fmt"
)

// BatchSink stores values a batch at a time for a runner started with
// [StartBatchSink]. With one writer (the default) the runner calls Write
// from its one goroutine, never concurrently; with [BatchConfig].Writers
// above 1 it calls Write from up to that many goroutines at once, each
// call with values of keys no other call in flight has.
type BatchSink[T any] interface {
	// Write stores the values of batch, in order, and returns how many of
	// them, from the start, are stored. On an error the runner retries
	// batch[n:] as its [RetryPolicy] says; an error the policy does not
	// retry drops batch[n] alone ([DropRejected]) and the rest is
	// written. A short write without an error counts as
	// [io.ErrShortWrite]; a write that stores every value and returns an
	// error counts as a failure, and nothing is retried or dropped. ctx ends when the runner's context does; a
	// write should return promptly then.
	Write(ctx context.Context, batch []T) (n int, err error)
}

// BatchConfig configures [StartBatchSink]. Every field is optional.
type BatchConfig[T any] struct {
	// Name names the runner in its drop reports ([Drop].WatcherName).
	Name string
	// Batch is the most values taken from the queue and passed to one
	// Write, at most [MaxQueueLength]; 0 means 1.
	Batch int
	// Writers is the most Write calls in flight at once, 1 to
	// [MaxWriters]; 0 means 1, the runner's own goroutine. With more than
	// one, Key is required, and values are written in order per key:
	// a value is passed to Write only once every earlier value of its
	// key is written or dropped, while values of other keys are written
	// in parallel. A batch holds values of keys no other Write in flight
	// holds, oldest key first; a key whose writes fail retries without
	// holding other keys back, except those sharing its batch. The
	// runner holds at most as many values beyond its queue as the queue
	// is long (at least Writers × Batch), waiting for their keys; when
	// that many wait, it takes no more from the queue, whose full-queue
	// behaviour then applies.
	Writers int
	// Key returns the key that orders v's writes (see Writers): values
	// whose order matters, such as the records of one object, share a
	// key. Called once per value, on the runner's goroutine; a panic
	// drops that value ([DropPanic]). Not used with one writer.
	Key func(v T) string
	// Retry is the retry policy; nil means [DefaultRetryPolicy].
	Retry *RetryPolicy
	// Select, if set, is called with each batch taken from the queue and
	// returns, appended to out (which it may use as scratch space), the
	// values to write; the others count as handled without a write (for
	// routing, or to skip what the sink stored before a restart). Values
	// it leaves out are not counted as dropped at shutdown either. A panic
	// in Select drops the whole batch ([DropPanic]).
	Select func(received, out []T) []T
	// Finished, if set, is called with each batch taken from the queue
	// once every value of it was written, dropped or left out by Select,
	// and every earlier batch was reported: in the order the batches were
	// taken, one call at a time, whatever order several writers finish
	// them in (a low watermark): a point to advance a checkpoint to. From
	// the first batch that lost values to the runner's stop
	// ([DropShutdown]: its context ended, or Stop, during the batch's
	// retries, or before it was written) on, it is not called, so that a
	// checkpoint never passes values a restart would write. A panic in
	// Finished is recovered and counted in the broadcaster's
	// [Stats].Panics.
	Finished func(received []T)
	// OnDrop, if set, is told of the values the runner drops after taking
	// them (rejected, retries exhausted, panic, shutdown), one call per
	// group dropped together. The values are the runner's: copy what is
	// kept.
	OnDrop func(d Drop, values []T)
	// OnRetry, if set, is told of each failed write that will be retried:
	// the values pending, the number of consecutive failures and the
	// error.
	OnRetry func(pending []T, failures int, err error)
}

// StartBatchSink starts a [Runner] that writes the values of w to sink, a
// batch at a time, with the retries of cfg.Retry, on one goroutine of its
// own. It shares the write loop, retry policy and drop reasons of a
// [Recorder]'s runners; a panic in Write drops the first value pending as
// [DropPanic]. The runner exits once w is stopped (by [Runner.Stop], the
// broadcaster's Shutdown or eviction) and drained. When ctx ends, the
// runner stops w, pauses and writes in progress are cut short (ctx is
// passed to Write), and what is still queued is dropped as [DropShutdown].
//
// It returns an error, and starts nothing, if ctx, w or sink is nil or cfg
// is invalid (a negative Batch or one above [MaxQueueLength], Writers out
// of range or above 1 without Key, an invalid Retry).
func StartBatchSink[T any](ctx context.Context, w *Watcher[T], sink BatchSink[T], cfg BatchConfig[T]) (*Runner[T], error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if w == nil || sink == nil {
		return nil, errors.New("fanout: StartBatchSink: nil watcher or sink")
	}
	if cfg.Batch < 0 || cfg.Batch > MaxQueueLength {
		return nil, fmt.Errorf("fanout: StartBatchSink: invalid Batch %d: must be 0 (one) to MaxQueueLength (%d)", cfg.Batch, MaxQueueLength)
	}
	if err := checkWriters(cfg.Writers, cfg.Key, true); err != nil {
		return nil, err
	}
	p := DefaultRetryPolicy()
	if cfg.Retry != nil {
		if err := cfg.Retry.Validate(); err != nil {
			return nil, err
		}
		p = *cfg.Retry
	}
	run := &Runner[T]{w: w, name: cfg.Name, batch: max(cfg.Batch, 1), retry: p, panicAs: DropPanic,
		sinkCtx: ctx, done: make(chan struct{}),
		hooks: runnerHooks[T]{sel: cfg.Select, finished: cfg.Finished, onDrop: cfg.OnDrop, onRetry: cfg.OnRetry}}
	run.ctx, run.cancel = context.WithCancel(ctx)
	run.stopOnEnd = context.AfterFunc(ctx, w.Stop)
	run.newHandler = func() handler[T] {
		return func(batch []T) bool {
			_, cut := run.writeBatch(sink, batch)
			return cut
		}
	}
	run.kw = newKeyedWriters(run, cfg.Writers, batchKey(run, cfg.Key), func() keyedHandler[T] {
		return func(values []T, _ []int) bool {
			_, cut := run.writeBatch(sink, values)
			return cut
		}
	})
	go run.loop()
	return run, nil
}
