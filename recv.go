package fanout

import (
	"context"
	"iter"
)

// This file holds the pull read path: Recv, Next and All, for a reader on
// the shared ring (its queue, reader.go; its parking, park.go) and for a
// watcher moved to a channel by ResultChan (DESIGN.md, section 7).

// Recv waits until at least one value is queued, moves up to len(buf) of the
// oldest queued values into buf, and returns how many. Once the watcher is
// closed and drained it returns 0 and the reason ([Watcher.Err]); if ctx ends
// first it returns 0 and ctx.Err(). With an
// empty buf it does not wait: it returns 0 and the reason if the watcher is
// closed and drained, else (0, nil).
//
// Recv is the fastest way to read: on the shared ring it costs one
// uncontended lock per batch, not per value. With a filter ([WithFilter])
// it returns once the filter has kept at least one value of a batch, so it
// may return fewer values than are queued; the filter works in buf, whose
// elements past the n returned may then hold values it rejected.
func (w *Watcher[T]) Recv(ctx context.Context, buf []T) (int, error) {
	if ctx == nil {
		return 0, errNilContext
	}
	if w.keeps {
		return w.recvFiltered(ctx, buf)
	}
	return w.recv(ctx, buf, nil)
}

// recv is Recv once ctx is checked. rr is nil but for a filtered reader
// (recvFiltered), whose read it is, across rounds and parks.
func (w *Watcher[T]) recv(ctx context.Context, buf []T, rr *rawRead) (int, error) {
	for {
		n, wake, c, err := w.tryRead(ctx, buf, rr)
		if n > 0 || err != nil || wake == nil {
			return n, err
		}
		err = w.park(ctx, wake, c)
		w.waiters.Add(-1)
		if err != nil {
			return 0, err
		}
	}
}

// tryRead is tryRecv for recv: a filtered reader's read rr goes to
// tryRecvKept.
func (w *Watcher[T]) tryRead(ctx context.Context, buf []T, rr *rawRead) (int, chan struct{}, uint64, error) {
	if rr != nil {
		return w.tryRecvKept(ctx, buf, rr)
	}
	return w.tryRecv(ctx, buf, nil, true)
}

// tryRecv reads what is there. If there is nothing yet it returns the
// channel to park on and the head it saw, having counted itself a waiter
// (only if mayPark). rr is nil but for a filtered ring reader's own reads
// (tryRecvKept), and a filtered watcher's are always such (Recv goes to
// recvFiltered; TopicsWatcher takes no filter): the read is counted among
// the watcher's readers (enterRead) and receives what take says about the
// values, and a watcher moved to a channel meanwhile returns errToChan at
// once.
func (w *Watcher[T]) tryRecv(ctx context.Context, buf []T, rr *rawRead, mayPark bool) (n int, wake chan struct{}, h uint64, err error) {
	w.mu.Lock()
	if w.mode == modeChan {
		return w.tryRecvChan(ctx, buf, rr)
	}
	if rr != nil {
		w.enterRead(rr)
	}
	b := w.b
	var log dropLog
	h = min(b.head.Load(), w.end)
	if n, r := w.settle(h); n > 0 {
		w.count(r, n, &log, nil)
	}
	before := w.o + w.c
	n = w.takeFor(rr, buf, h, b.ring.Load())
	wakePublishers := false
	if n > 0 {
		if rr == nil {
			w.taken += uint64(n)
		} else {
			w.startReading(rr, uint64(n)) // counted once filtered (see counted)
		}
		w.publishMarks()
		hook(hookReaderMarked)
		wakePublishers = w.madeRoom(before)
	}
	if n == 0 && w.queued(h) == 0 {
		err = w.err // closed and drained
		if err != nil {
			w.checkDrained(h)
		}
	}
	if n == 0 && err == nil && len(buf) > 0 && mayPark {
		wake = w.armWake()
	} else {
		w.passWake()
	}
	w.mu.Unlock()
	if wakePublishers {
		b.signalRoom()
	}
	log.report(b)
	return n, wake, h, err
}

// tryRecvChan is tryRecv for a watcher moved to a channel (ResultChan
// was called): a filtered reader's own read learns it (errToChan), any
// other read receives from the channel. Caller holds w.mu; it unlocks it.
func (w *Watcher[T]) tryRecvChan(ctx context.Context, buf []T, rr *rawRead) (int, chan struct{}, uint64, error) {
	if rr != nil {
		w.mu.Unlock()
		return 0, nil, 0, errToChan
	}
	w.passWake()
	ch := w.cs.ch
	w.mu.Unlock()
	if len(buf) == 0 {
		return 0, nil, 0, w.drainedErr(ch)
	}
	n, err := w.recvChan(ctx, ch, buf)
	return n, nil, 0, err
}

// armWake counts a reader about to park as a waiter and returns the
// channel it parks on. Caller holds w.mu.
func (w *Watcher[T]) armWake() chan struct{} {
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
	}
	w.waiters.Add(1)
	return w.wake
}

// drainedErr returns the close reason once ch is closed and drained.
func (w *Watcher[T]) drainedErr(ch chan T) error {
	if len(ch) > 0 {
		return nil
	}
	if err := w.closeErr(); err != nil && len(ch) == 0 {
		return err
	}
	return nil
}

func (w *Watcher[T]) recvChan(ctx context.Context, ch chan T, buf []T) (int, error) {
	n := 0
	for n < len(buf) {
		select {
		case v, ok := <-ch:
			if !ok {
				if n > 0 {
					return n, nil
				}
				return 0, w.closeErr()
			}
			buf[n] = v
			n++
			continue
		default:
		}
		if n > 0 {
			return n, nil
		}
		v, ok, err := recvWait(ctx, ch)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, w.closeErr()
		}
		buf[0] = v
		n = 1
	}
	return n, nil
}

// recvWait blocks for one value of ch or the end of ctx. Without a deadline
// it is a plain receive: two-channel selects are kept off the delivery path.
func recvWait[T any](ctx context.Context, ch chan T) (v T, ok bool, err error) {
	done := ctx.Done()
	if done == nil {
		v, ok = <-ch
		return v, ok, nil
	}
	select {
	case v, ok = <-ch:
		return v, ok, nil
	case <-done:
		return v, false, ctx.Err()
	}
}

// Next waits for the oldest queued value and returns it, like [Watcher.Recv]
// with a one-element buffer.
func (w *Watcher[T]) Next(ctx context.Context) (T, error) {
	var one [1]T
	_, err := w.Recv(ctx, one[:])
	return one[0], err
}

// All returns an iterator over the watcher's values, each taken with
// [Watcher.Next]. It ends when the watcher closes and is drained, or when ctx
// ends; [Watcher.Err] or ctx.Err() tells which. A nil ctx is a mistake (see
// "Contexts" in the package documentation): a range over the iterator then
// ends at once, takes nothing, and from then on [Watcher.Err] returns an
// error naming the nil context, since the loop cannot return it.
func (w *Watcher[T]) All(ctx context.Context) iter.Seq[T] {
	return func(yield func(T) bool) {
		if ctx == nil {
			w.mu.Lock()
			w.nilCtx = true
			w.mu.Unlock()
			return
		}
		for {
			v, err := w.Next(ctx)
			if err != nil || !yield(v) {
				return
			}
		}
	}
}
