package events

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/k8s/eventstats"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// ShutdownTimeout bounds [Broadcaster.Shutdown]: how long it waits for the
// events already recorded to get their last attempt before it gives up on
// the rest (counted as dropped at shutdown). [Broadcaster.ShutdownContext]
// takes any bound.
const ShutdownTimeout = 5 * time.Second

// errNoSink is returned by StartRecordingToSinkWithContext of a
// broadcaster made without a sink.
var errNoSink = errors.New("events: the broadcaster has no EventSink")

// errNilContext is returned for a nil context: pass context.Background()
// for no bound.
var errNilContext = errors.New("events: nil context; pass context.Background() for no bound")

// Broadcaster is the [EventBroadcaster] that [NewBroadcaster] and [New]
// return, built on a [fanout.Recorder]. Recorders never block and start no
// goroutines; each sink, watcher and logger has one goroutine and its own
// queue, and each sink also one maintenance goroutine for its series.
// Every event that is not written is counted by cause ([Broadcaster.Stats]).
// Beyond client-go's interface it has [Broadcaster.Flush],
// [Broadcaster.ShutdownContext] and [Broadcaster.Stats].
//
// It is safe for concurrent use. Make it with [NewBroadcaster] or [New]; the
// zero value is not usable.
type Broadcaster struct {
	sink      EventSink
	cacheSize int
	writers   int // per sink (WithWriters)
	rec       *fanout.Recorder[*eventsv1.Event]

	counters adapt.Counters

	// quit ends when ShutdownContext starts; final is the context of
	// that first ShutdownContext, which bounds the last writes of the
	// series still open (set under mu before quit ends).
	quit    context.Context
	quitNow context.CancelFunc
	mu      sync.Mutex
	stopped bool
	final   context.Context
	sinks   map[*sinkRun]struct{}
	evicted uint64 // open series evicted by the correlators of retired sinks
}

// sinkRun is one StartRecordingToSink call: what ShutdownContext and
// SeriesEvicted need.
type sinkRun struct {
	series seriesCorrelator
	cancel context.CancelFunc // ends the context of its writes
	done   chan struct{}      // closed when its maintenance goroutine exits
}

var (
	_ EventBroadcaster  = (*Broadcaster)(nil)
	_ eventstats.Source = (*Broadcaster)(nil)
)

// NewBroadcaster returns a broadcaster, a [*Broadcaster], that writes to
// sink with client-go's defaults: 1000 queued events per sink and watcher,
// 12 attempts per write 10 to 12.5 s apart, series finished after 6
// minutes idle and refreshed every 30 minutes. Nothing is written before
// [Broadcaster.StartRecordingToSinkWithContext]. A nil sink is allowed for
// a broadcaster that only feeds watchers and loggers.
func NewBroadcaster(sink EventSink) EventBroadcaster {
	b, err := New(sink)
	if err != nil {
		panic("events: " + err.Error()) // unreachable: the defaults are valid
	}
	return b
}

// New is [NewBroadcaster] with options, returning the concrete type. It
// returns an error for a bad [WithQueueLength] or [WithCacheSize] (see
// "Options" in the package doc). It never panics.
func New(sink EventSink, opts ...Option) (*Broadcaster, error) {
	cfg := newConfig(opts)
	if cfg.err != nil {
		return nil, cfg.err
	}
	b := &Broadcaster{
		sink:      sink,
		cacheSize: cfg.cacheSize,
		writers:   cfg.writers,
		sinks:     make(map[*sinkRun]struct{}),
	}
	b.quit, b.quitNow = context.WithCancel(context.Background())
	rec, err := fanout.NewRecorder[*eventsv1.Event](
		fanout.WithQueueLength(cfg.queue),
		fanout.WithRetry(cfg.retry()),
		fanout.WithDropHandler(logDrop),
	)
	if err != nil {
		return nil, err
	}
	b.rec = rec
	return b, nil
}

// logDrop logs an event the pipeline gave up on, where the sink adapter
// has not (it logs API errors and exhausted retries, with the sink's
// logger, as client-go). It runs on the recorder's or a runner's
// goroutine, so a full queue is logged only at V(2): the count is in Stats.
func logDrop(d fanout.Drop) {
	logger := klog.Background()
	switch d.Reason {
	case fanout.DropRejected:
		// API errors were logged by the sink adapter; a retryable error
		// here is a panic in a sink or handler.
		if d.Err != nil && adapt.Retryable(d.Err) {
			logger.Error(d.Err, "Event handler failed, event dropped")
		}
	case fanout.DropFull:
		logger.V(2).Info("Event dropped: queue full")
	case fanout.DropShutdown:
		logger.V(2).Info("Event dropped: shutting down", "err", d.Err)
	}
}

// NewRecorder returns a recorder of events reported by reportingController
// (ReportingInstance is reportingController-hostname). scheme resolves the
// kinds of the objects events are about. The recorder logs with
// klog.Background() until given a logger with WithLogger.
func (b *Broadcaster) NewRecorder(scheme *runtime.Scheme, reportingController string) EventRecorderLogger {
	hostname, _ := os.Hostname()
	return &recorder{
		b:          b,
		scheme:     scheme,
		controller: reportingController,
		instance:   reportingController + "-" + hostname,
		logger:     klog.Background(),
	}
}

// StartRecordingToSink is [Broadcaster.StartRecordingToSinkWithContext]
// with a context that ends when stopCh is closed; an error is logged.
//
// Deprecated: use StartRecordingToSinkWithContext, as with client-go.
func (b *Broadcaster) StartRecordingToSink(stopCh <-chan struct{}) {
	if err := b.StartRecordingToSinkWithContext(wait.ContextForChannel(stopCh)); err != nil {
		klog.Background().Error(err, "Failed to start recording to sink")
	}
}

// StartRecordingToSinkWithContext starts writing every event to the
// broadcaster's sink. It starts two goroutines: the sink runner, which
// groups events into series and writes them with retries, up to
// [WithWriters] at once (one write per series at a time, on goroutines of
// its own),
// and a maintenance goroutine, which re-writes open series every 30 minutes
// and writes and forgets series idle for 6 minutes. Each call has its own
// series cache. When ctx ends both stop: no write is retried any more and
// each event still queued gets one more attempt (with ctx, so a sink that
// honours it fails fast). ctx's logger (klog.FromContext) logs the writes,
// and ctx's values reach the sink.
//
// It returns an error after [Broadcaster.Shutdown], or for a broadcaster
// made without a sink.
func (b *Broadcaster) StartRecordingToSinkWithContext(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if b.sink == nil {
		return errNoSink
	}
	series, err := newSeriesCorrelator(b.cacheSize)
	if err != nil {
		return err // unreachable: the cache size is validated
	}
	runCtx, cancel := context.WithCancel(ctx)
	w := &sinkAdapter{sink: b.sink, ctx: runCtx, logger: klog.FromContext(ctx)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		cancel()
		return fanout.ErrStopped
	}
	run, err := b.rec.StartSink(w, series, fanout.WithWriters[*eventsv1.Event](b.writers, nil))
	if err != nil {
		cancel()
		return err
	}
	sr := &sinkRun{series: series, cancel: cancel, done: make(chan struct{})}
	b.sinks[sr] = struct{}{}
	go b.maintain(ctx, run, w, sr)
	return nil
}

// maintain runs a sink's series maintenance until ctx ends (when it stops
// the runner too), the broadcaster shuts down, or the runner exits. Like
// client-go's wait.UntilWithContext, finish and refresh run a period after
// their previous run ended; when both are due, finish runs first.
// client-go also runs both at the start, when a new correlator has nothing
// to write: they are skipped.
func (b *Broadcaster) maintain(ctx context.Context, run *fanout.Runner[*eventsv1.Event], w *sinkAdapter, sr *sinkRun) {
	defer close(sr.done)
	defer b.retire(ctx, run, w, sr)
	// A pass ends early when recording ends or the broadcaster shuts down.
	passCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.quit, cancel)()
	nextFinish := time.Now().Add(finishTime)
	nextRefresh := time.Now().Add(refreshTime)
	timer := time.NewTimer(time.Until(earliest(nextFinish, nextRefresh)))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			run.Stop()
			sr.cancel()
			return
		case <-b.quit.Done():
			return
		case <-run.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		if !now.Before(nextFinish) {
			sr.series.finish(passCtx, w)
			nextFinish = time.Now().Add(finishTime)
		}
		if !now.Before(nextRefresh) {
			sr.series.refresh(passCtx, w)
			nextRefresh = time.Now().Add(refreshTime)
		}
		timer.Reset(time.Until(earliest(nextFinish, nextRefresh)))
	}
}

// retire ends a sink once its runner has exited, when nothing can be
// merged any more. At Shutdown, while the recording context lasts, the
// series holding occurrences not yet written get a last write with their
// final count, bounded by the shutdown's context (see
// seriesCorrelator.finishUnwritten); what is still open after that is
// forgotten, and what was merged into it is counted lost (the correlator
// reports it to the runner). The sink's evicted series are added to the
// broadcaster's.
func (b *Broadcaster) retire(ctx context.Context, run *fanout.Runner[*eventsv1.Event], w *sinkAdapter, sr *sinkRun) {
	<-run.Done()
	if b.quit.Err() != nil && ctx.Err() == nil {
		b.mu.Lock()
		final := b.final
		b.mu.Unlock()
		sr.series.finishUnwritten(final, w)
	}
	sr.series.Purge()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.evicted += sr.series.Stats().EvictedOpen
	delete(b.sinks, sr)
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// StartEventWatcher calls eventHandler with every event (an
// *eventsv1.Event), in order, on a goroutine of its own with its own
// queue. The events are shared with the sinks and other watchers: do not
// modify them. The returned function stops the watcher. A panic in
// eventHandler drops that event (counted as rejected) instead of crashing
// the process. It returns an error after Shutdown or for a nil handler.
func (b *Broadcaster) StartEventWatcher(eventHandler func(event runtime.Object)) (func(), error) {
	if eventHandler == nil {
		return nil, errors.New("events: StartEventWatcher: nil event handler")
	}
	run, err := b.rec.StartHandler(func(ev *eventsv1.Event) { eventHandler(ev) })
	if err != nil {
		return nil, err
	}
	return run.Stop, nil
}

// StartLogging logs every event to logger, as client-go does: message
// "Event occurred" with the keys object, kind, apiVersion, type, reason,
// action and note. Use logger.V(n) to choose the verbosity. The returned
// function stops it. It returns an error after Shutdown.
func (b *Broadcaster) StartLogging(logger klog.Logger) (func(), error) {
	return b.StartEventWatcher(func(obj runtime.Object) {
		ev := obj.(*eventsv1.Event)
		logger.Info("Event occurred",
			"object", klog.KRef(ev.Regarding.Namespace, ev.Regarding.Name),
			"kind", ev.Regarding.Kind,
			"apiVersion", ev.Regarding.APIVersion,
			"type", ev.Type,
			"reason", ev.Reason,
			"action", ev.Action,
			"note", ev.Note)
	})
}

// StartStructuredLogging is [Broadcaster.StartLogging] with
// klog.Background().V(verbosity); an error is logged and gives a function
// that does nothing.
//
// Deprecated: use StartLogging, as with client-go.
func (b *Broadcaster) StartStructuredLogging(verbosity klog.Level) func() {
	logger := klog.Background().V(int(verbosity))
	stop, err := b.StartLogging(logger)
	if err != nil {
		logger.Error(err, "Failed to start event watcher")
		return func() {}
	}
	return stop
}

// Flush waits until every sink and watcher has written, merged into a
// series, skipped or dropped every event recorded before the call (retries
// included), or until ctx ends, and then returns ctx.Err(). Series
// maintenance writes are not waited for. client-go has no equivalent.
func (b *Broadcaster) Flush(ctx context.Context) error {
	return b.rec.Flush(ctx)
}

// Shutdown is [Broadcaster.ShutdownContext] bounded by [ShutdownTimeout].
func (b *Broadcaster) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	_ = b.ShutdownContext(ctx)
}

// ShutdownContext shuts the broadcaster down. From its start, recorders
// record nothing (counted as refused), the Start methods return an error,
// no write is retried and the maintenance goroutines write nothing more;
// every event already queued, and the write in flight, get at most one more
// attempt. It returns nil once every sink, watcher and maintenance
// goroutine has finished, or ctx.Err() as soon as ctx ends: then the events
// still queued are dropped (counted as dropped at shutdown) and the context
// of the writes in flight is cancelled, so that they end as soon as the
// sink honours it. Once a sink's queue is done, each of its series that
// holds occurrences not yet written gets one last write with its final
// count, within ctx (client-go loses them); a series already written in
// full is not written again. It is idempotent and safe from any
// goroutine.
func (b *Broadcaster) ShutdownContext(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	b.mu.Lock()
	if !b.stopped {
		b.final = ctx
	}
	b.stopped = true
	b.quitNow()
	runs := make([]*sinkRun, 0, len(b.sinks))
	for sr := range b.sinks {
		runs = append(runs, sr)
	}
	b.mu.Unlock()
	err := b.rec.Shutdown(ctx)
	if err == nil {
	wait:
		for _, sr := range runs {
			select {
			case <-sr.done:
			case <-ctx.Done():
				err = ctx.Err()
				break wait
			}
		}
	}
	for _, sr := range runs {
		sr.cancel()
	}
	return err
}

// Stats returns the broadcaster's counters, totals over all its sinks and
// watchers (to export them to Prometheus, see
// [github.com/fanout-go/fanout/k8s/metrics.NewCollector]). They are the
// core recorder's ([fanout.RecorderStats]), whose sink runners also count
// what their series correlators report after the fact
// ([fanout.LossCounter]), and the recorders':
//
//   - Invalid counts events a recorder could not build (no reference to
//     the object, a type other than Normal or Warning).
//   - Refused counts events recorded after Shutdown.
//   - Written counts events created and series written by the runners
//     (not the refresh and finish writes, which write no new event).
//   - Merged counts occurrences folded into a series (the third and later
//     ones of a series), less those lost below (counted in MergedLost).
//   - DroppedFull also counts occurrences merged into a series that the
//     full series cache evicted before they were written; DroppedRejected
//     also counts those of a series whose final write the API server
//     rejected (also the last write at Shutdown); DroppedShutdown also
//     counts those of series still open when recording ended: when the
//     context given to StartRecordingToSinkWithContext ended (they are
//     not written, as with client-go), or when their last write at
//     Shutdown failed with an error worth retrying or did not happen
//     within its context. After a Shutdown that returned nil with a sink
//     that accepted every write, none are lost.
//   - Failures also counts failed series refresh, finish and last
//     writes.
func (b *Broadcaster) Stats() eventstats.Stats {
	return adapt.Stats(b.rec.Stats(), &b.counters)
}

// Snapshot returns the snapshot of the core recorder the broadcaster is
// built on ([fanout.Recorder.Snapshot]): its watchers (one per sink,
// handler and watcher), the runners beside them, and its counters, which
// [Broadcaster.Stats] completes with the adapter's own. It is what the
// live view shows
// ([github.com/fanout-go/fanout/debug.Recorder]).
func (b *Broadcaster) Snapshot() fanout.RecorderSnapshot { return b.rec.Snapshot() }

// SeriesEvicted returns the number of open series (events seen at least
// twice) that a full series cache forgot before they finished; see
// [WithCacheSize]. client-go's cache is unbounded and never evicts.
func (b *Broadcaster) SeriesEvicted() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.evicted
	for sr := range b.sinks {
		n += sr.series.Stats().EvictedOpen
	}
	return n
}
