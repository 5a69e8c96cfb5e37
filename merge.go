package fanout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fanout-go/fanout/internal/guard"
)

// ReportLossesTo makes the correlator report its late losses and its
// failed [Correlator.WriteOpen] writes to lr. A correlator that merges
// (see [DedupStage].WriteFirst) reports to one [LossCounter] only: a
// second call returns an error, so that two sink runners cannot share it
// (its merged values would be counted by one and lost by the other). A
// correlator that does not merge loses nothing late; it accepts any number
// of calls and ignores them. lr must not be nil.
func (c *Correlator[T]) ReportLossesTo(lr LossCounter) error {
	if lr == nil {
		return errors.New("fanout: Correlator.ReportLossesTo: nil LossCounter")
	}
	if !c.merges() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.report != nil {
		return errors.New("fanout: the Correlator already reports to a sink runner: give each sink its own")
	}
	c.report = lr
	return nil
}

// merges reports whether the dedup stage defers writes.
func (c *Correlator[T]) merges() bool {
	return c.dedup != nil && c.dedup.Merge != nil && c.dedup.WriteFirst > 0
}

// noLoss is a record's fate when it was forgotten after a successful
// write: its values in flight are not lost even if a write fails.
const noLoss = numDropReasons

// loss is merged values lost under the lock, reported after it is
// released.
type loss struct {
	reason DropReason
	n      int
	err    error
	failed error // a failed write, if any
}

// lose reports l, without the lock held.
func (c *Correlator[T]) lose(l loss) {
	if l.n <= 0 && l.failed == nil {
		return
	}
	c.mu.Lock()
	lr := c.report
	c.mu.Unlock()
	if lr == nil {
		return
	}
	if l.failed != nil {
		lr.Failed(l.failed)
	}
	if l.n > 0 {
		lr.Lost(l.reason, l.n, l.err)
	}
}

// open reports whether e's next occurrence will only be merged, or it
// holds merged values not yet written.
func (c *Correlator[T]) open(e *seen[T]) bool {
	return e.pending > 0 || c.merges() && e.count >= c.dedup.WriteFirst
}

// forget accounts for e, just removed from the cache: its merged values
// not yet written are lost for reason (unless noLoss), and its writes in
// flight learn their fate when they settle.
func (c *Correlator[T]) forget(e *seen[T], reason DropReason) loss {
	l := loss{reason: reason}
	if reason != noLoss {
		l.n = e.pending
	}
	e.pending = 0
	if e.inflight > 0 {
		e.gone, e.fate = true, reason
	}
	return l
}

// Sweep says which open records [Correlator.WriteOpen] writes, and how.
type Sweep[T any] struct {
	// Write writes a record: a private copy, with its count and latest
	// occurrence marked by [DedupStage].Merge. It is called with
	// WriteOpen's ctx, one record at a time, without the correlator's
	// lock held, so that values are correlated meanwhile. It returns the
	// record as stored; after a successful write of a record that stays
	// open, the record becomes that (marked again by Merge if it saw more
	// occurrences meanwhile): return the value given to keep it as it
	// was. A panic in Write is a failure that is not retryable. Required.
	Write func(ctx context.Context, v T) (stored T, err error)
	// IdleFor, if positive, selects only the records whose latest
	// occurrence is more than IdleFor old (see [DedupStage].Time); zero
	// selects every open record.
	IdleFor time.Duration
	// Finish forgets each selected record once written, unless it saw
	// more occurrences meanwhile. A record whose write fails with an error
	// that Retryable rejects is forgotten too, its merged values reported
	// lost as [DropRejected]; one that Retryable accepts stays open, for a
	// later sweep. With IdleFor, records that are not open and are as old
	// are forgotten without a write. client-go's events.k8s.io series:
	// idle for 6 minutes (finishSeries).
	Finish bool
	// Retryable classifies failed writes for Finish. Nil means that no
	// error is retryable. Without Finish a failed write leaves the record
	// as it was, its merged values still to be written.
	Retryable func(error) bool
	// Unwritten selects only the open records that hold merged values
	// not yet written (nor being written): a last sweep before the sink
	// stops need not repeat what it already stored. client-go has no such
	// sweep; fanout's events.k8s.io series finish this way at Shutdown.
	Unwritten bool
}

// WriteOpen writes the open records that s selects (see
// [DedupStage].WriteFirst), oldest first, one at a time with s.Write, and
// returns when they are written, or ctx.Err() as soon as ctx ends between
// two writes. Every failed write is reported to the [LossCounter]
// ([LossCounter].Failed), and so are merged values lost by a sweep
// that finishes. Its purpose is a maintenance goroutine of the owner's:
// client-go's events.k8s.io series re-write every open record every 30
// minutes (refreshExistingEventSeries: a zero Sweep) and finish records
// idle for 6 minutes.
//
// The correlator's lock is held only to select, copy and settle a record,
// never during a write. A record that saw occurrences while being written
// keeps them (they are written by the next sweep), and a record evicted
// meanwhile loses only the values the write did not cover: on success
// nothing, on failure what it carried (as [DropFull]). A panic in Clone
// or Merge while WriteOpen copies or settles a record is reported as a
// failed write ([LossCounter].Failed) and the sweep goes on; the record
// keeps its merged values for a later sweep; a panic in the correlator's
// Clock is returned as an error, before anything is written. It returns an
// error, and writes nothing, for a nil ctx, without a merging dedup stage
// or without s.Write, or for a negative s.IdleFor.
func (c *Correlator[T]) WriteOpen(ctx context.Context, s Sweep[T]) error {
	switch {
	case ctx == nil:
		return errNilContext
	case !c.merges():
		return errors.New("fanout: Correlator.WriteOpen: the dedup stage does not merge (DedupStage.WriteFirst is 0)")
	case s.Write == nil:
		return errors.New("fanout: Correlator.WriteOpen: Sweep.Write is nil")
	case s.IdleFor < 0:
		return fmt.Errorf("fanout: Correlator.WriteOpen: negative Sweep.IdleFor %v", s.IdleFor)
	}
	var keys []string
	if perr := guard.Call(func() { keys = c.selectOpen(s) }); perr != nil {
		return perr // the correlator's Clock panicked: nothing was written
	}
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		var w openWrite[T]
		var ok bool
		if perr := guard.Call(func() { w, ok = c.claim(key, s) }); perr != nil {
			c.lose(loss{failed: perr}) // Clone panicked: the record is as it was
			continue
		}
		if ok {
			stored, err := w.write(ctx, s.Write)
			var l loss
			if perr := guard.Call(func() { l = c.applyWrite(w, stored, err, s) }); perr != nil {
				// Clone or Merge panicked settling a write that
				// succeeded (the only case that calls them): nothing is
				// lost, the occurrences merged meanwhile stay pending.
				l = loss{failed: perr}
			}
			c.lose(l)
		}
	}
	return nil
}

// selectOpen returns the keys of the open records s selects, oldest first;
// with s.Finish and s.IdleFor it forgets the idle records that are not
// open.
func (c *Correlator[T]) selectOpen(s Sweep[T]) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var keys []string
	for _, key := range c.dedupCache.Keys() {
		e, _ := c.dedupCache.Peek(key)
		switch {
		case !c.selects(e, s, now):
		case c.open(e):
			keys = append(keys, key)
		case s.Finish && s.IdleFor > 0:
			c.dedupCache.Remove(key)
			c.forget(e, noLoss)
		}
	}
	return keys
}

// selects reports whether s selects e by age (IdleFor) and, with
// s.Unwritten, by merged values not yet written.
func (c *Correlator[T]) selects(e *seen[T], s Sweep[T], now time.Time) bool {
	if s.Unwritten && e.pending == 0 {
		return false
	}
	return s.IdleFor == 0 || now.Sub(e.last) > s.IdleFor
}

// openWrite is a record claimed for a write by WriteOpen.
type openWrite[T any] struct {
	key string
	e   *seen[T]
	v   T      // a private copy to write
	id  uint64 // e.id when claimed
	ver uint64 // e.ver when claimed
	n   int    // the merged values the write covers
}

// claim takes a copy of key's record if it is still open and selected,
// and moves its merged values in flight.
func (c *Correlator[T]) claim(key string, s Sweep[T]) (openWrite[T], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.dedupCache.Peek(key)
	if !ok || !c.open(e) || !c.selects(e, s, c.clock.Now()) {
		return openWrite[T]{}, false
	}
	w := openWrite[T]{key: key, e: e, v: c.own(e.v, c.clone == nil), id: e.id, ver: e.ver, n: e.pending}
	e.inflight += e.pending
	e.pending = 0
	return w, true
}

// write calls f with w's copy; a panic is returned as an error.
func (w openWrite[T]) write(ctx context.Context, f func(context.Context, T) (T, error)) (stored T, err error) {
	if perr := guard.Call(func() { stored, err = f(ctx, w.v) }); perr != nil {
		return stored, &writePanic{perr}
	}
	return stored, err
}

// writePanic is a panic in [Sweep].Write: never retryable.
type writePanic struct{ err error }

func (p *writePanic) Error() string { return p.err.Error() }
func (p *writePanic) Unwrap() error { return p.err }

// applyWrite applies the outcome of w's write to its record and returns what
// to report.
func (c *Correlator[T]) applyWrite(w openWrite[T], stored T, err error, s Sweep[T]) loss {
	final := err != nil && !retryable(s, err)
	c.mu.Lock()
	defer c.mu.Unlock()
	e := w.e
	if e.id != w.id {
		// Evicted, and reused for another key, meanwhile: only a record
		// without values in flight is reused, so the write covered none
		// (w.n is 0), and nothing of it is the successor's.
		return loss{failed: err}
	}
	e.inflight -= w.n
	l := loss{failed: err}
	switch {
	case e.gone:
		if err != nil && e.fate != noLoss {
			l.reason, l.n, l.err = e.fate, w.n, err
		}
	case err == nil && s.Finish:
		if e.ver == w.ver {
			c.remove(w.key, e, noLoss)
		}
	case err == nil:
		e.v = c.own(stored, c.clone == nil)
		if e.ver != w.ver {
			e.v = c.dedup.Merge(e.v, e.count, e.last)
		}
	case final && s.Finish && e.ver == w.ver:
		e.pending += w.n
		l = c.remove(w.key, e, DropRejected)
		l.err, l.failed = err, err
	default:
		e.pending += w.n // to be written by a later sweep
	}
	return l
}

// retryable applies s.Retryable to err, a failure of s.Write.
func retryable[T any](s Sweep[T], err error) bool {
	var p *writePanic
	if s.Retryable == nil || errors.As(err, &p) {
		return false
	}
	retry := false
	if guard.Call(func() { retry = s.Retryable(err) }) != nil {
		return false
	}
	return retry
}

// remove forgets e, the record of key.
func (c *Correlator[T]) remove(key string, e *seen[T], reason DropReason) loss {
	c.dedupCache.Remove(key)
	return c.forget(e, reason)
}

// Purge forgets every record of every stage, as a correlator starts. The
// merged values of open records that were not written are reported lost
// as [DropShutdown], and so are those of writes in flight
// ([Correlator.WriteOpen]) that then fail. Call it when the sink will
// write no more: client-go leaves series open when recording ends.
func (c *Correlator[T]) Purge() {
	c.lose(c.purge())
}

func (c *Correlator[T]) purge() loss {
	c.mu.Lock()
	defer c.mu.Unlock()
	var l loss
	if c.dedupCache != nil {
		for _, e := range c.dedupCache.Values() {
			l.n += c.forget(e, DropShutdown).n
		}
		c.dedupCache.Purge()
		l.reason = DropShutdown
	}
	if c.aggCache != nil {
		c.aggCache.Purge()
	}
	if c.spamCache != nil {
		c.spamCache.Purge()
	}
	return l
}

// CorrelatorStats is a snapshot of a [Correlator]'s state.
type CorrelatorStats struct {
	// Records is the number of keys the dedup stage remembers.
	Records int
	// EvictedOpen counts open records (see [DedupStage].WriteFirst) that
	// the full dedup cache evicted to make room for a new key.
	EvictedOpen uint64
}

// Stats returns the correlator's counters.
func (c *Correlator[T]) Stats() CorrelatorStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := CorrelatorStats{EvictedOpen: c.evicted}
	if c.dedupCache != nil {
		s.Records = c.dedupCache.Len()
	}
	return s
}
