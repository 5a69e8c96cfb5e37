package record

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/k8s/eventstats"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ShutdownTimeout bounds [Broadcaster.Shutdown]: how long it waits for the
// events already recorded to get their last attempt before it gives up on
// the rest (counted as dropped at shutdown). Use
// [Broadcaster.ShutdownContext] to choose another bound.
const ShutdownTimeout = 5 * time.Second

// Broadcaster is the [EventBroadcaster] that [NewBroadcaster] returns,
// built on a [fanout.Recorder]: recorders never block and start no
// goroutines; each watcher and logger has one goroutine (two once its
// watch's ResultChan is called), each sink its runner and up to
// [WithWriters] writers, and each its own queue; every event that is not
// written is counted by cause ([Stats]).
// Beyond client-go's interface it has [Broadcaster.Flush],
// [Broadcaster.ShutdownContext] and [Broadcaster.Stats].
type Broadcaster struct {
	rec      *fanout.Recorder[*v1.Event]
	opts     CorrelatorOptions
	ctx      context.Context // logger source; cancelled by Shutdown
	cancel   context.CancelFunc
	stopCtx  func() bool // unregisters WithContext's shutdown
	counters adapt.Counters
	clock    clock.PassiveClock
	full     fullLog
	writers  int // per sink (WithWriters)
}

var _ EventBroadcaster = (*Broadcaster)(nil)
var _ eventstats.Source = (*Broadcaster)(nil)

// errNilContext is returned for a nil context: pass context.Background()
// for no bound.
var errNilContext = errors.New("record: nil context; pass context.Background() for no bound")

// NewBroadcaster returns a new event broadcaster, a [*Broadcaster], with
// client-go's defaults: queues of 1000 events that drop new events when
// full, 12 attempts per event 10 s apart, the correlator defaults of
// [NewEventCorrelator]. It panics for a bad [WithQueueLength].
func NewBroadcaster(opts ...BroadcasterOption) EventBroadcaster {
	return New(opts...)
}

// New is [NewBroadcaster] returning the concrete type. It panics for a
// bad [WithQueueLength]; [NewChecked] returns the error instead.
func New(opts ...BroadcasterOption) *Broadcaster {
	b, err := NewChecked(opts...)
	if err != nil {
		panic(err)
	}
	return b
}

// NewChecked is [New] returning an error for a bad option value
// ([WithQueueLength]) instead of panicking, for callers that can report
// it (fanoutctrl.NewManager does).
func NewChecked(opts ...BroadcasterOption) (*Broadcaster, error) {
	c := newConfig(opts)
	if c.err != nil {
		return nil, c.err
	}
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	b := &Broadcaster{opts: c.correlator, clock: clock.RealClock{}, writers: c.writers}
	b.ctx, b.cancel = context.WithCancel(ctx)
	rec, err := fanout.NewRecorder[*v1.Event](
		fanout.WithQueueLength(c.queueLength),
		fanout.WithRetry(c.retry()),
		fanout.WithDropHandler(b.logDrop),
	)
	if err != nil {
		b.cancel()
		return nil, fmt.Errorf("record: %w", err)
	}
	b.rec = rec
	if ctx.Done() != nil {
		// The callback may run before AfterFunc returns (ctx already
		// done): it must not touch b.stopCtx.
		b.stopCtx = context.AfterFunc(ctx, func() {
			ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
			defer cancel()
			_ = b.shutdown(ctx)
		})
	}
	return b, nil
}

// NewBroadcasterForTests returns a broadcaster that pauses sleepDuration
// between attempts to write an event.
func NewBroadcasterForTests(sleepDuration time.Duration) EventBroadcaster {
	return NewBroadcaster(WithSleepDuration(sleepDuration))
}

// NewBroadcasterWithCorrelatorOptions returns a broadcaster whose sinks use
// the given correlator options.
func NewBroadcasterWithCorrelatorOptions(options CorrelatorOptions) EventBroadcaster {
	return NewBroadcaster(WithCorrelatorOptions(options))
}

func (b *Broadcaster) logger() klog.Logger { return klog.FromContext(b.ctx) }

// logDrop logs a dropped event as client-go does where client-go logs it;
// a spam-filtered event is only counted, as client-go only skips it, and
// events dropped from a full queue, which client-go drops silently, are
// logged at most once per fullLogEvery (fullLog).
func (b *Broadcaster) logDrop(d fanout.Drop) {
	l := b.logger()
	switch d.Reason {
	case fanout.DropFull:
		b.full.log(l, time.Now())
	case fanout.DropRetries:
		l.Error(d.Err, "Unable to write event (retry limit exceeded!)")
	case fanout.DropShutdown:
		l.Error(d.Err, "Unable to write event (broadcaster is shut down)")
	case fanout.DropRejected:
		if d.Err != nil && !isAPIError(d.Err) {
			// A panic in a sink, handler or key function; API errors were
			// logged by the sink.
			l.Error(d.Err, "Event handler failed, event dropped")
		}
	}
}

// fullLogEvery is the least time between two log lines of events dropped
// from a full queue.
const fullLogEvery = 10 * time.Second

// fullLog limits the log lines of events dropped because a sink's or
// watcher's queue was full. client-go drops those silently; logging each
// one would flood the log while an API server is down. The first drop is
// logged, then at most one line per fullLogEvery, with the number dropped
// since the last line; Stats counts every one.
type fullLog struct {
	mu      sync.Mutex
	next    time.Time
	dropped uint64
}

func (f *fullLog) log(l klog.Logger, now time.Time) {
	f.mu.Lock()
	f.dropped++
	if now.Before(f.next) {
		f.mu.Unlock()
		return
	}
	n := f.dropped
	f.dropped, f.next = 0, now.Add(fullLogEvery)
	f.mu.Unlock()
	l.Error(nil, "Unable to record event: too many queued events, dropped event", "dropped", n)
}

func isAPIError(err error) bool { return !adapt.Retryable(err) }

// StartRecordingToSink starts writing every event to sink, through a
// correlator of its own (see [WithCorrelatorOptions]), in order, on one
// goroutine, and with retries, up to [WithWriters] writes at once (one
// write per Event at a time). Stopping the returned watch stops it taking events; those
// already queued are still written, with their retries, as in client-go
// (Shutdown cuts the retries). Its ResultChan yields no events and is
// closed once the sink has stopped (calling it starts a second goroutine,
// which waits for that). A nil sink, or
// a broadcaster already shut down, gives a watch that is already stopped.
func (b *Broadcaster) StartRecordingToSink(sink EventSink) watch.Interface {
	if sink == nil {
		b.logger().Error(nil, "Unable to start recording to a nil event sink")
		return watch.NewEmptyWatch()
	}
	run, err := b.rec.StartSink(newSinkAdapter(sink, b.logger(), b.opts.LRUCacheSize), sinkCorrelator(b.opts),
		fanout.WithWriters[*v1.Event](b.writers, nil))
	return b.runnerWatch(run, err)
}

// StartEventWatcher calls eventHandler with every event, in order, on one
// goroutine. The events are shared with other watchers and sinks: do not
// modify them. Stopping the returned watch stops it; its ResultChan yields
// no events and is closed once the handler has stopped (calling it starts
// a second goroutine, which waits for that). A nil handler, or
// a broadcaster already shut down, gives a watch that is already stopped.
// A panic in eventHandler drops that event (counted) instead of crashing.
func (b *Broadcaster) StartEventWatcher(eventHandler func(*v1.Event)) watch.Interface {
	if eventHandler == nil {
		b.logger().Error(nil, "Unable to start an event watcher with a nil handler")
		return watch.NewEmptyWatch()
	}
	run, err := b.rec.StartHandler(eventHandler)
	return b.runnerWatch(run, err)
}

// StartLogging logs every event with logf, in client-go's format:
// "Event(%#v): type: '%v' reason: '%v' %v" of the involved object, type,
// reason and message.
func (b *Broadcaster) StartLogging(logf func(format string, args ...interface{})) watch.Interface {
	if logf == nil {
		b.logger().Error(nil, "Unable to start event logging with a nil function")
		return watch.NewEmptyWatch()
	}
	return b.StartEventWatcher(func(e *v1.Event) {
		logf("Event(%#v): type: '%v' reason: '%v' %v", e.InvolvedObject, e.Type, e.Reason, e.Message)
	})
}

// StartStructuredLogging logs every event at verbosity with the
// broadcaster's logger, as client-go does: message "Event occurred" and the
// keys object, fieldPath, kind, apiVersion, type, reason and message.
func (b *Broadcaster) StartStructuredLogging(verbosity klog.Level) watch.Interface {
	loggerV := b.logger().V(int(verbosity))
	return b.StartEventWatcher(func(e *v1.Event) {
		loggerV.Info("Event occurred",
			"object", klog.KRef(e.InvolvedObject.Namespace, e.InvolvedObject.Name),
			"fieldPath", e.InvolvedObject.FieldPath,
			"kind", e.InvolvedObject.Kind,
			"apiVersion", e.InvolvedObject.APIVersion,
			"type", e.Type, "reason", e.Reason, "message", e.Message)
	})
}

func (b *Broadcaster) runnerWatch(run *fanout.Runner[*v1.Event], err error) watch.Interface {
	if err != nil {
		b.logger().Error(err, "Unable start event watcher (will not retry!)")
		return watch.NewEmptyWatch()
	}
	return &runnerWatch{run: run}
}

// NewRecorder returns a recorder of events from source. scheme resolves
// the kinds of the objects events are about.
func (b *Broadcaster) NewRecorder(scheme *runtime.Scheme, source v1.EventSource) EventRecorderLogger {
	return &recorder{b: b, scheme: scheme, source: source, logger: klog.Background()}
}

// Flush waits until every sink and watcher has written, skipped or dropped
// every event recorded before the call (retries included), or until ctx
// ends, and then returns ctx.Err(). A nil ctx is an error. client-go has no
// equivalent.
func (b *Broadcaster) Flush(ctx context.Context) error {
	return b.rec.Flush(ctx)
}

// Shutdown shuts the broadcaster down, waiting at most [ShutdownTimeout];
// see [Broadcaster.ShutdownContext]. Called from an event handler or a sink
// it waits for that very handler, which cannot finish first, so it returns
// after ShutdownTimeout; call it on another goroutine there (go
// b.Shutdown()).
func (b *Broadcaster) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	_ = b.ShutdownContext(ctx)
}

// ShutdownContext shuts the broadcaster down: recorders record nothing
// more (counted as refused), no write is retried, and every event already
// queued gets at most one more attempt. It returns nil once every sink and
// watcher has finished, or ctx.Err() as soon as ctx ends, leaving the rest
// dropped (counted as dropped at shutdown once the write or handler call in
// flight returns: queued in Stats until then); a write in flight then ends
// on its own, since client-go's sinks take no context. It is idempotent. A
// nil ctx is an error, and shuts nothing down.
func (b *Broadcaster) ShutdownContext(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if b.stopCtx != nil {
		b.stopCtx()
	}
	return b.shutdown(ctx)
}

func (b *Broadcaster) shutdown(ctx context.Context) error {
	err := b.rec.Shutdown(ctx)
	b.cancel()
	if err != nil && !errors.Is(err, fanout.ErrStopped) {
		return err
	}
	return nil
}

// Stats returns the broadcaster's counters, totals over all its sinks and
// watchers. To export them to Prometheus, see
// [github.com/fanout-go/fanout/k8s/metrics.NewCollector].
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

// runnerWatch is the watch.Interface of a sink or handler.
type runnerWatch struct {
	run  *fanout.Runner[*v1.Event]
	once sync.Once
	ch   chan watch.Event
}

// Stop stops the runner taking events; those already queued are still
// handled, a sink's with their retries, as client-go's are (its watcher
// goroutine drains the closed channel). Shutdown cuts the retries.
func (w *runnerWatch) Stop() { w.run.Drain() }

// ResultChan yields nothing (the sink or handler takes the events) and is
// closed once the runner has exited. Its first call starts the goroutine
// that waits for that; the goroutine ends with the runner.
func (w *runnerWatch) ResultChan() <-chan watch.Event {
	w.once.Do(func() {
		w.ch = make(chan watch.Event)
		go func() {
			<-w.run.Done()
			close(w.ch)
		}()
	})
	return w.ch
}
