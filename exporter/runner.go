package exporter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/fanout-go/fanout"
)

// DropReason says why a sink did not store an occurrence routed to it.
type DropReason int

// The reasons a sink drops an occurrence, as in the metric
// fanout_eventer_sink_dropped_total{reason}.
const (
	// DropQueueOldest: the queue was full and the strategy (DropOldest)
	// discarded the oldest queued occurrence.
	DropQueueOldest DropReason = iota
	// DropQueueFull: the queue was full and the strategy (DropNewest)
	// discarded the new occurrence.
	DropQueueFull
	// DropQueueTimeout: the queue stayed full for the strategy's timeout
	// (WaitTimeout).
	DropQueueTimeout
	// DropRejected: the sink failed with a [Permanent] error.
	DropRejected
	// DropRetries: the write failed [Retry].MaxTries times.
	DropRetries
	// DropPanic: the sink panicked writing it.
	DropPanic
	// DropShutdown: it was still queued or unwritten when the shutdown
	// deadline passed. Unless the sink is lossy, the checkpoint does not
	// cover it, so it is written after a restart.
	DropShutdown
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{"queue_oldest", "queue_full", "queue_timeout", "rejected", "retries_exhausted", "panic", "shutdown"}

// String returns the reason's label value.
func (r DropReason) String() string {
	if r < 0 || r >= numDropReasons {
		return fmt.Sprintf("DropReason(%d)", int(r))
	}
	return dropReasonNames[r]
}

// SinkStats is a snapshot of one sink's counters.
type SinkStats struct {
	// Name is the receiver's name.
	Name string
	// Sent counts occurrences stored.
	Sent uint64
	// Retries counts failed writes that were retried.
	Retries uint64
	// Deduplicated counts occurrences not written again after a restart
	// because the sink had stored them before (see [Marker]).
	Deduplicated uint64
	// Dropped counts occurrences not stored, by reason.
	Dropped [numDropReasons]uint64
	// Queued is the queue's current depth, QueueLength its capacity.
	Queued, QueueLength int
}

// runner drives one sink: its own watcher on the exporter's broadcaster and
// its own goroutine.
type runner struct {
	name     string
	bit      uint64
	sink     Sink
	w        *fanout.Watcher[*Occurrence]
	retry    Retry
	batch    int
	queueLen int
	lossless bool
	skip     map[string]struct{} // owned by the goroutine
	log      *slog.Logger
	ctx      context.Context // ends at the shutdown deadline

	// lastDone is the Seq of the last occurrence the runner has finished
	// with; taken counts the occurrences it took from its watcher and
	// finished with.
	lastDone, taken atomic.Uint64

	sent, retries, dedup atomic.Uint64
	drops                [numDropReasons]atomic.Uint64
	done                 chan struct{}
}

// run is the runner's goroutine: it takes batches from the watcher until
// the broadcaster has shut down and the queue is drained, or the runner's
// context ends.
func (r *runner) run() {
	defer close(r.done)
	buf := make([]*Occurrence, r.batch)
	sel := make([]*Occurrence, 0, r.batch)
	for {
		n, err := r.w.Recv(r.ctx, buf)
		if n > 0 {
			sel = r.selectMine(buf[:n], sel[:0])
			r.write(sel)
			r.lastDone.Store(buf[n-1].Seq)
			r.taken.Add(uint64(n))
			clear(buf[:n])
		}
		if err != nil {
			break
		}
	}
	r.w.Stop()
	if q := r.w.Stats().Queued; q > 0 {
		r.drops[DropShutdown].Add(uint64(q))
	}
}

// selectMine appends to sel the occurrences routed to this sink, leaving
// out those it stored before a restart.
func (r *runner) selectMine(batch, sel []*Occurrence) []*Occurrence {
	for _, o := range batch {
		if o.receivers&r.bit == 0 {
			continue
		}
		if len(r.skip) > 0 {
			if _, ok := r.skip[o.Key()]; ok {
				delete(r.skip, o.Key())
				r.dedup.Add(1)
				continue
			}
		}
		sel = append(sel, o)
	}
	return sel
}

// write stores batch, retrying as the policy says.
func (r *runner) write(batch []*Occurrence) {
	failures := 0
	for len(batch) > 0 {
		if r.ctx.Err() != nil {
			r.drops[DropShutdown].Add(uint64(len(batch)))
			return
		}
		n, err := r.call(batch)
		if n > 0 {
			r.sent.Add(uint64(n))
			batch, failures = batch[n:], 0
		}
		if err == nil {
			continue
		}
		var p panicError
		switch {
		case errors.As(err, &p):
			r.drop(batch[:1], DropPanic, err)
			batch = batch[1:]
		case IsPermanent(err):
			r.drop(batch[:1], DropRejected, err)
			batch = batch[1:]
		default:
			failures++
			if r.retry.MaxTries > 0 && failures >= r.retry.MaxTries {
				r.drop(batch, DropRetries, err)
				return
			}
			r.retries.Add(1)
			r.log.Warn("sink write failed; retrying", "sink", r.name, "occurrences", len(batch), "failures", failures, "err", err)
			sleep(r.ctx, r.retry.pause(failures))
		}
	}
}

// call calls the sink's Write, turning a panic into an error and a short
// write without an error into io.ErrShortWrite.
func (r *runner) call(batch []*Occurrence) (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, panicError{p}
		}
	}()
	n, err = r.sink.Write(r.ctx, batch)
	n = min(max(n, 0), len(batch))
	if err == nil && n < len(batch) {
		err = io.ErrShortWrite
	}
	return n, err
}

func (r *runner) drop(os []*Occurrence, reason DropReason, err error) {
	r.drops[reason].Add(uint64(len(os)))
	r.log.Error("sink dropped occurrences", "sink", r.name, "reason", reason.String(), "occurrences", len(os),
		"first", os[0].Key(), "err", err)
}

// doneThrough returns a Seq through which the runner has finished with
// every occurrence published, given head, the last Seq published.
func (r *runner) doneThrough(head uint64) uint64 {
	st := r.w.Stats()
	if st.Queued == 0 && r.taken.Load() == st.Delivered {
		// Everything up to head was published before Stats: it was
		// taken and finished with, or dropped by the queue.
		return head
	}
	d := r.lastDone.Load()
	if !r.lossless {
		// A lossy sink holds the checkpoint back by at most its queue
		// and one batch: what is older was stored or dropped.
		if lag := uint64(r.queueLen + r.batch); head > lag && head-lag > d {
			d = head - lag
		}
	}
	return d
}

// stats returns the runner's counters.
func (r *runner) stats() SinkStats {
	ws := r.w.Stats()
	s := SinkStats{Name: r.name, Sent: r.sent.Load(), Retries: r.retries.Load(), Deduplicated: r.dedup.Load(),
		Queued: ws.Queued, QueueLength: ws.QueueLength}
	for i := range s.Dropped {
		s.Dropped[i] = r.drops[i].Load()
	}
	s.Dropped[DropQueueOldest] += ws.DroppedOldest
	s.Dropped[DropQueueFull] += ws.DroppedFull + ws.DroppedEvicted + ws.DroppedPanic
	s.Dropped[DropQueueTimeout] += ws.DroppedTimeout
	return s
}

type panicError struct{ v any }

// Error returns the panic's value.
func (p panicError) Error() string { return fmt.Sprintf("sink panicked: %v", p.v) }
