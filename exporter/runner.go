package exporter

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/fanout-go/fanout"
)

// DropReason says why a sink did not store an occurrence routed to it: the
// core's [fanout.DropReason]. The exporter's metric
// fanout_eventer_sink_dropped_total{reason} keeps its own label values for
// compatibility (see [DropLabel]).
type DropReason = fanout.DropReason

// The reasons a sink drops an occurrence besides a full queue, the core's
// constants under the same names; a full queue's are the core's
// [fanout.DropOldest], [fanout.DropFull] and [fanout.DropTimeout].
const (
	// DropRejected: the sink failed with a [Permanent] error.
	DropRejected = fanout.DropRejected
	// DropRetries: the write failed [Retry].MaxTries times; its label is
	// "retries_exhausted".
	DropRetries = fanout.DropRetries
	// DropPanic: the sink panicked writing it.
	DropPanic = fanout.DropPanic
	// DropShutdown: it was still queued or unwritten when the shutdown
	// deadline passed. Unless the sink is lossy, the checkpoint does not
	// cover it, so it is written after a restart.
	DropShutdown = fanout.DropShutdown
)

// sinkDropReasons are the reasons a sink counts, in the metric's order.
var sinkDropReasons = [...]DropReason{fanout.DropOldest, fanout.DropFull, fanout.DropTimeout,
	fanout.DropRejected, fanout.DropRetries, fanout.DropPanic, fanout.DropShutdown}

// DropLabel returns the label value of reason r in
// fanout_eventer_sink_dropped_total{reason}: the exporter's names from
// before it ran on the core's runner (queue_oldest, queue_full,
// queue_timeout, rejected, retries_exhausted, panic, shutdown), and the
// core's name for any other reason.
func DropLabel(r DropReason) string {
	switch r {
	case fanout.DropOldest:
		return "queue_oldest"
	case fanout.DropFull:
		return "queue_full"
	case fanout.DropTimeout:
		return "queue_timeout"
	case fanout.DropRetries:
		return "retries_exhausted"
	}
	return r.String()
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
	// Dropped counts occurrences not stored, by reason: every reason a
	// sink counts is present, zero or not. A watcher eviction counts as
	// [fanout.DropFull], a panic of the queue's strategy as
	// [fanout.DropPanic] (neither happens with the built-in strategies).
	Dropped map[DropReason]uint64
	// Queued is the queue's current depth, QueueLength its capacity.
	Queued, QueueLength int
}

// runner drives one sink with a core runner ([fanout.StartBatchSink]) on
// its own watcher of the exporter's broadcaster. It adds what the
// exporter needs through the runner's hooks: the routing bit and the
// idempotency skip set (Select) and the checkpoint marks (Finished).
type runner struct {
	name     string
	bit      uint64
	sink     Sink
	w        *fanout.Watcher[*Occurrence]
	run      *fanout.Runner[*Occurrence]
	retry    Retry
	batch    int
	writers  int
	queueLen int
	lossless bool
	skip     map[string]struct{} // owned by the goroutine
	log      *slog.Logger

	// lastDone is the Seq of the last occurrence the runner has finished
	// with; taken counts the occurrences it took from its watcher and
	// finished with.
	lastDone, taken atomic.Uint64
	dedup           atomic.Uint64
	// abandoned is set when Shutdown gave up waiting for the runner's
	// write: only what it finished with counts as done.
	abandoned atomic.Bool
}

// start starts the runner's goroutine: it writes batches from the watcher
// until the broadcaster has shut down and the queue is drained, or ctx
// (the shutdown deadline) ends.
func (r *runner) start(ctx context.Context) error {
	p := r.retry.Policy()
	run, err := fanout.StartBatchSink(ctx, r.w, fanout.BatchSink[*Occurrence](r.sink), fanout.BatchConfig[*Occurrence]{
		Name: r.name, Batch: r.batch, Retry: &p, Writers: r.writers, Key: objectKey,
		Select:   r.selectMine,
		Finished: r.finished,
		OnDrop: func(d fanout.Drop, os []*Occurrence) {
			if d.Reason == fanout.DropShutdown {
				return // counted; Shutdown's error says the deadline passed, once
			}
			r.log.Error("sink dropped occurrences", "sink", r.name, "reason", DropLabel(d.Reason), "occurrences", len(os),
				"first", os[0].Key(), "err", d.Err)
		},
		OnRetry: func(pending []*Occurrence, failures int, err error) {
			r.log.Warn("sink write failed; retrying", "sink", r.name, "occurrences", len(pending), "failures", failures, "err", err)
		},
	})
	r.run = run
	return err
}

// done returns a channel closed when the runner's goroutine has exited.
func (r *runner) done() <-chan struct{} { return r.run.Done() }

// finished records that the runner is done with batch.
func (r *runner) finished(batch []*Occurrence) {
	r.lastDone.Store(batch[len(batch)-1].Seq)
	r.taken.Add(uint64(len(batch)))
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
		for range o.extra[r.bit] { // named by several rules, with kubernetes-event-exporter's stream
			sel = append(sel, o)
		}
	}
	return sel
}

// held is the most occurrences the runner holds beyond its queue: one
// batch with one writer; with several, as many as its queue is long, at
// least a batch per writer (see fanout.BatchConfig.Writers).
func (r *runner) held() int {
	if r.writers <= 1 {
		return r.batch
	}
	return max(r.queueLen, r.writers*r.batch)
}

// objectKey orders a sink's writes with several writers: the occurrences
// of one involved object are written in order, one write at a time.
func objectKey(o *Occurrence) string {
	if o.Regarding.UID != "" {
		return o.Regarding.UID
	}
	return o.Regarding.Kind + "\x00" + o.Regarding.Namespace + "\x00" + o.Regarding.Name
}

// doneThrough returns a Seq through which the runner has finished with
// every occurrence published, given head, the last Seq given out, and the
// Seqs of the last occurrences published.
func (r *runner) doneThrough(head uint64, published *recentSeqs) uint64 {
	if r.abandoned.Load() {
		return r.lastDone.Load() // what its stuck write holds is not done
	}
	st := r.w.Stats()
	if st.Queued == 0 && r.taken.Load() == st.Delivered {
		// Everything up to head was published before Stats: it was
		// taken and finished with, or dropped by the queue.
		return head
	}
	d := r.lastDone.Load()
	if !r.lossless {
		// A lossy sink holds the checkpoint back by at most its queue
		// and one batch of the occurrences published: what is older was
		// stored or dropped. Counted in occurrences published, not in
		// Seqs: deletions, progress marks and occurrences routed nowhere
		// take Seqs that enter no queue.
		if s, ok := published.before(uint64(r.queueLen + r.held())); ok && s > d {
			d = s
		}
	}
	return d
}

// recentSeqs remembers the Seqs of the last occurrences published, in a
// ring as long as the longest lossy sink's queue and batch, plus one.
type recentSeqs struct {
	mu   sync.Mutex
	seqs []uint64
	n    uint64 // occurrences published
}

// grow makes the ring at least n long. Before the first add.
func (r *recentSeqs) grow(n int) {
	if n > len(r.seqs) {
		r.seqs = make([]uint64, n)
	}
}

// add records the Seq of an occurrence just published.
func (r *recentSeqs) add(seq uint64) {
	r.mu.Lock()
	if len(r.seqs) > 0 {
		r.seqs[r.n%uint64(len(r.seqs))] = seq
	}
	r.n++
	r.mu.Unlock()
}

// before returns the Seq of the occurrence published lag places before the
// last one, and false if there is none (or the ring is too short).
func (r *recentSeqs) before(lag uint64) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n <= lag || lag >= uint64(len(r.seqs)) {
		return 0, false
	}
	return r.seqs[(r.n-1-lag)%uint64(len(r.seqs))], true
}

// pending returns how many occurrences the runner has taken and not
// finished with, or has queued.
func (r *runner) pending() uint64 {
	st := r.w.Stats()
	return st.Delivered - min(r.taken.Load(), st.Delivered) + uint64(st.Queued)
}

// abandonedNote returns ", abandoned" if Shutdown abandoned the runner.
func (r *runner) abandonedNote() string {
	if r.abandoned.Load() {
		return fmt.Sprintf(" (abandoned: its write did not return within %v of the deadline)", shutdownGrace)
	}
	return ""
}

// stats returns the runner's counters.
func (r *runner) stats() SinkStats {
	rs := r.run.Stats()
	s := SinkStats{Name: r.name, Sent: rs.Written, Retries: rs.Retries, Deduplicated: r.dedup.Load(),
		Dropped: make(map[DropReason]uint64, len(sinkDropReasons)), Queued: rs.Queued, QueueLength: r.w.Stats().QueueLength}
	for _, reason := range sinkDropReasons {
		s.Dropped[reason] = rs.DroppedBy(reason)
	}
	s.Dropped[fanout.DropFull] += rs.DroppedEvicted
	return s
}
