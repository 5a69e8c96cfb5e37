package fanout

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/fanout-go/fanout/internal/guard"
)

// WaitReport says that a publish has waited longer than the threshold of
// [WithWaitReport] for a watcher whose queue is full: who blocks the
// publisher.
type WaitReport struct {
	// WatcherID and WatcherName identify the full watcher.
	WatcherID   uint64
	WatcherName string
	// QueueLength is its queue capacity, Queued what it holds now.
	QueueLength, Queued int
	// Waited is how long the publish call has waited so far.
	Waited time.Duration
	// Readers is the number of goroutines parked reading the watcher with
	// the pull methods. 0 for a watcher that nobody reads otherwise hints
	// that its reader is busy, stalled, or is the publishing goroutine
	// itself (which then waits for itself: only Stop or Shutdown end it).
	// It is 0 for a channel watcher, whose readers cannot be seen.
	Readers int
}

type waitReportOption struct {
	after time.Duration
	f     func(WaitReport)
}

func (o waitReportOption) applyOption(c *config) {
	c.waitAfter, c.waitReport, c.newOnly = o.after, o.f, "WithWaitReport"
}

// WithWaitReport makes a broadcaster report, once per publish call and
// watcher, a publish that has waited longer than after for a full watcher:
// f is called with a [WaitReport] on the waiting goroutine, with no lock
// held, and [Stats].WaitReports counts the reports. The wait goes on
// afterwards. A publish that waits for its own watcher (a watcher's reader
// that publishes into the broadcaster it reads, with WaitIfChannelFull)
// waits for ever; the report is the way to find it. [LogWaitReports]
// returns an f that logs. It applies to [New] only (Watch returns an
// error). The default is none; nil f removes it; after must be positive.
//
// It costs nothing until a publisher has to wait; then, per wait, a timer,
// the list of the watchers waited for and a select instead of a plain
// receive. With one lossless watcher whose queue of 100 fills up once per
// hundred values, that took about a third of a publisher's throughput
// (0.55 against 0.80 of the benchmark harness's minimal ring, interleaved
// runs); with no wait, nothing.
// A panic in f is recovered and counted in [Stats].Panics.
func WithWaitReport(after time.Duration, f func(WaitReport)) Option {
	return waitReportOption{after, f}
}

// LogWaitReports returns a function for [WithWaitReport] that logs each
// report with l, at level Warn, as "publisher waits for a full watcher".
func LogWaitReports(l *slog.Logger) func(WaitReport) {
	return func(r WaitReport) {
		l.LogAttrs(context.Background(), slog.LevelWarn, "publisher waits for a full watcher",
			slog.Uint64("watcher", r.WatcherID), slog.String("watcher_name", r.WatcherName),
			slog.Int("queued", r.Queued), slog.Int("queue_length", r.QueueLength),
			slog.Duration("waited", r.Waited), slog.Int("readers", r.Readers))
	}
}

// waitReporter times a publisher's wait for the watchers ws and reports
// them once it has waited longer than the threshold. A zero waitReporter
// (no WithWaitReport) has a nil channel, which a select never takes.
type waitReporter[T any] struct {
	t  *time.Timer
	ws []*Watcher[T]
}

// reporter returns the reporter for a wait of the call for ws, which it
// keeps, less the watchers the call already reported: the callers make a
// new list per wait. Caller holds b.mu.
func (p *pub[T]) reporter(ws []*Watcher[T]) waitReporter[T] {
	b := p.b
	if b.cfg.waitReport == nil {
		return waitReporter[T]{}
	}
	if len(p.reported) > 0 {
		ws = slices.DeleteFunc(ws, func(w *Watcher[T]) bool { return slices.Contains(p.reported, w.id) })
	}
	if len(ws) == 0 {
		return waitReporter[T]{}
	}
	p.waitStart()
	return waitReporter[T]{t: time.NewTimer(b.cfg.waitAfter - time.Since(p.start)), ws: ws}
}

// c returns the channel that fires when the report is due, or nil.
func (r *waitReporter[T]) c() <-chan time.Time {
	if r.t == nil {
		return nil
	}
	return r.t.C
}

// stop releases the timer.
func (r *waitReporter[T]) stop() {
	if r.t != nil {
		r.t.Stop()
	}
}

// report calls the broadcaster's WithWaitReport function for each watcher
// the call waits for, once per call and watcher. Caller holds no lock.
func (p *pub[T]) report(r *waitReporter[T]) {
	b := p.b
	waited := time.Since(p.start)
	for _, w := range r.ws {
		p.reported = append(p.reported, w.id)
		st := w.Stats()
		rep := WaitReport{WatcherID: w.id, WatcherName: w.nameOf(), QueueLength: st.QueueLength, Queued: st.Queued,
			Waited: waited, Readers: int(w.waiters.Load())}
		b.waitReports.Add(1)
		if guard.Call(func() { b.cfg.waitReport(rep) }) != nil {
			b.countPanic()
		}
	}
	r.t = nil
}
