package fanout

import "context"

// This file is what a bridge that acknowledges upstream needs (the NATS
// module's durable consumer, a Kafka or queue reader): the sequence number
// each published value took, and how far the lossless watchers have taken
// the values. See "Taken values" in the package documentation.

// ActionSeq is [Broadcaster.ActionContext] that also returns the sequence
// number v took in the broadcaster's total order: the number of values
// accepted before it (so the first value accepted is 0, and
// [Stats].Accepted is the next one's). Compare it with
// [Broadcaster.Taken]. On error the sequence number means nothing.
func (b *Broadcaster[T]) ActionSeq(ctx context.Context, v T) (uint64, error) {
	vs := [1]T{v}
	first, _, err := b.ActionBatchSeq(ctx, vs[:])
	return first, err
}

// ActionBatchSeq is [Broadcaster.ActionBatchContext] that also returns the
// sequence number of the first value accepted: the n values accepted took
// first, first+1, ... first+n-1, since a batch is contiguous. When n is 0,
// first means nothing.
func (b *Broadcaster[T]) ActionBatchSeq(ctx context.Context, vs []T) (first uint64, n int, err error) {
	first, n, _, err = b.publishContext(ctx, vs)
	return first, n, err
}

// Taken returns how far the lossless watchers have taken the accepted
// values: every value whose sequence number (see [Broadcaster.ActionSeq])
// is below Taken has been taken by every [WaitIfChannelFull] watcher that
// was registered when it was accepted, or that watcher has left (it was
// stopped or evicted). A value is taken by a watcher when [Watcher.Recv],
// [Watcher.Next] or [Watcher.All] returned it, or when its consumer
// received it from the channel of [Watcher.ResultChan]; a watcher
// registered [WithCommit] takes it only when it calls [Watcher.Commit]
// after that. A value a watcher's filter rejects ([WithFilter]) is taken
// once the filter has been asked about it (see "Filters" in the package
// documentation).
//
// Watchers of the other behaviours never hold Taken back: they may lose
// values anyway. With no lossless watcher, Taken is [Stats].Accepted.
// After Shutdown, the lossless watchers hold Taken back until they have
// read what stays queued for them.
//
// Taken never decreases. It costs a scan of the lossless watchers under
// the broadcaster's lock, and nothing on the publish path: call it once
// per batch of values, not per value.
func (b *Broadcaster[T]) Taken() uint64 {
	b.mu.Lock()
	h := b.head.Load()
	f := h
	for _, w := range b.holders {
		f = min(f, w.takenFloor(h))
	}
	// Each watcher's bound is exact or low (a value handed to a channel
	// before it was accepted, or one sent but not yet recorded), never high,
	// and what is taken stays taken: the largest bound seen is still true.
	f = max(f, b.taken)
	b.taken = f
	b.mu.Unlock() // nothing fastBound reads changed
	return f
}

// takenFloor returns a lower bound of the sequence number of the first
// value of the lossless watcher w that it has not taken (or, with
// WithCommit, not committed), at most head h. Caller holds b.mu.
func (w *Watcher[T]) takenFloor(h uint64) uint64 {
	if w.commits() {
		return min(h, w.x.committed.Load())
	}
	return w.progress(h)
}

// progress returns a lower bound of the sequence number of the first value
// the watcher has not taken, at most h: exact, or low by one value handed
// to a channel before it was accepted. Caller holds b.mu.
func (w *Watcher[T]) progress(h uint64) uint64 {
	if w.mode == modeChan {
		f := w.chanProgress(h)
		if w.filtering() {
			f = w.keptFloor(f) // a read of the ring may still be filtering
		}
		return f
	}
	// pin is the first ring value the reader still holds: nothing is
	// skipped or moved off the ring for a lossless reader that is open,
	// but by a filter (priv and a sift hold values from before pin).
	f := w.pin.Load()
	if w.filtering() {
		f = w.keptFloor(f)
	}
	return min(h, max(w.regSeq, f))
}

// chanProgress is progress for a watcher moved to a channel. Caller holds
// b.mu.
func (w *Watcher[T]) chanProgress(h uint64) uint64 {
	n := uint64(len(w.cs.ch))
	switch {
	case n == 0:
		return h
	case w.cs.seqs != nil:
		// A filter leaves gaps: the channel's values are not the
		// last n sequences.
		return min(h, max(w.regSeq, w.cs.seqs.unreceived(n)))
	}
	// Values enter the channel in order, every one of them for a
	// lossless watcher: what is still in it is the newest.
	return max(w.regSeq, h-min(h, n))
}

// Commit tells the broadcaster that the consumer is done with every value
// it has taken from this watcher so far. It matters only for a
// [WaitIfChannelFull] watcher registered [WithCommit], which holds
// [Broadcaster.Taken] back until then; for others it does nothing. It
// costs the broadcaster's lock, once.
func (w *Watcher[T]) Commit() {
	if !w.commits() || w.kind != kindWait {
		return
	}
	b := w.b
	b.mu.Lock()
	if f := w.progress(b.head.Load()); f > w.x.committed.Load() {
		w.x.committed.Store(f)
	}
	b.mu.Unlock() // nothing fastBound reads changed
}

type commitOption struct{}

func (commitOption) applyOption(c *config) { c.commit = true }

// WithCommit makes a [WaitIfChannelFull] watcher take a value, for
// [Broadcaster.Taken], only once its consumer has called [Watcher.Commit]
// after receiving it: the form to use when a value must not be
// acknowledged upstream before the consumer's own work on it is done (it
// is written somewhere, say), so that a crash in between redelivers it.
// It costs one Commit call per batch the consumer finishes. It has no
// effect on a watcher of another behaviour. The default is off: a value is
// taken once it has been received.
func WithCommit() Option { return commitOption{} }
