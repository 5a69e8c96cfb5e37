// Package record is a drop-in replacement for client-go's tools/record
// (core/v1 Events), built on the fanout engine. Switching is one import
// path: "k8s.io/client-go/tools/record" becomes
//
//	import "github.com/fanout-go/fanout/k8s/record"
//
// The interfaces and option structs ([EventBroadcaster], [EventRecorder],
// [EventRecorderLogger], [EventSink], [CorrelatorOptions],
// [EventCorrelateResult] and the function types) are aliases of client-go's,
// so recorders and broadcasters from this package go wherever client-go's
// go (controller-runtime managers, client-go helpers) and the other way
// round.
//
// # Same behaviour
//
// Defaults and decisions are client-go v0.37's:
//
//	queue per sink and watcher   1000 events, new events dropped when full
//	attempts per event           12; 10 s apart, the first pause random in [0, 10 s)
//	caches                       LRU of 4096 entries per stage, per sink
//	aggregation                  10 distinct messages within 600 s: a combined event,
//	                             "(combined from similar events): " + message
//	deduplication                a repeat takes the first event's name, Count+1, and is
//	                             written as a strategic merge patch of count,
//	                             lastTimestamp and message (Create on a 404)
//	spam filter                  token bucket per source+object+type: burst 25,
//	                             one token back per 300 s
//	event name                   "<object name>.<unix nanos in hex>"
//	namespace                    the object's, or "default"
//
// Write errors are classified as client-go does: a request that cannot be
// built and any API status error are final; every other error is retried.
// After shutdown an event gets one more attempt and no retry. The log lines
// of StartLogging and StartStructuredLogging are client-go's.
//
// # Better than client-go
//
//   - Goroutines are bounded by sinks and watchers, never one per event: a
//     watcher or logger has one (two once the watch's ResultChan is
//     called), a sink its runner and up to [WithWriters] writers (32 by
//     default: see "Goroutines"). Recording never blocks and starts
//     nothing.
//   - Nothing is lost silently. Every event that is not written is counted by
//     cause (queue full, spam-filtered, rejected, retries exhausted, invalid
//     input, shutdown): see [Broadcaster.Stats] and the Prometheus collector
//     [github.com/fanout-go/fanout/k8s/metrics.NewCollector] (a separate
//     module, so that only programs that ask for it link Prometheus), which
//     you register yourself.
//   - [Broadcaster.Flush] waits until everything recorded so far has been
//     written, skipped or dropped.
//   - Shutdown is bounded ([ShutdownTimeout], or [Broadcaster.ShutdownContext]).
//   - [FakeRecorder] never hangs a test: a full buffer waits up to
//     [FakeRecorderWait] for a reader, then discards and counts.
//   - No input panics: a nil or unregistered object, a nil scheme, an
//     unsupported type, or a panicking handler, sink or key function is
//     logged and counted.
//   - Deterministic aggregation: at the threshold client-go forgets an
//     arbitrary message (map order); this package forgets the oldest, which is
//     one of client-go's possible choices.
//
// The bounds cost what client-go, unbounded, does not: a burst larger than
// a sink's queue (1000 events, [WithQueueLength]) drops the excess,
// counted, even into a healthy API server slower than the burst; Shutdown
// waits up to [ShutdownTimeout] for slow sinks and watchers and drops what
// they have not reached by then (counted once the call in flight returns;
// queued in Stats until then), where client-go's returns at once and its
// goroutines go on; and Shutdown called from inside a watcher's handler
// waits for that very handler (see [Broadcaster.Shutdown]).
//
// Edge cases decided differently, each covered by the parity tests against
// client-go: a zero argument to [NewEventAggregator] or
// [NewEventSourceObjectSpamFilter] means client-go's default (client-go
// would combine every event, skip every event or never refill); a negative
// option means the default too (see Options); a remembered count of zero
// or less counts as never seen (client-go stores counts as unsigned, so -1
// is a huge count); and a count saturates at the largest int32 instead of
// wrapping to a negative number.
//
// # Options
//
// The repository's configuration convention (see "Configuration" in the
// core's package doc), shared with [github.com/fanout-go/fanout/k8s/events]:
// where client-go has the setting, its rule holds, for drop-in
// compatibility: a zero size or count means the default, as for
// client-go's CorrelatorOptions, and so does a negative one (client-go
// would misbehave); a negative pause between attempts means none. Where
// client-go has not ([WithQueueLength]), a value no setting can mean is
// not normalised: [New] and [NewBroadcaster], whose client-go signature
// returns no error, panic with a message naming it; [NewChecked] returns
// it. WithQueueLength(0)
// in particular is neither the default nor the core's hand-off queue. The
// defaults are the core's ([fanout.DefaultCacheSize],
// [fanout.DefaultRetryPolicy], ...), which are client-go's.
//
//	option                                    default  zero or negative
//	----------------------------------------  -------  --------------------------------
//	WithSleepDuration                         10 s     no pause
//	WithQueueLength                           1000     panic in New (above 16,777,216 too)
//	CorrelatorOptions.LRUCacheSize            4096     default
//	CorrelatorOptions.BurstSize               25       default
//	CorrelatorOptions.QPS                     1/300    default (NaN too; +Inf: no filter)
//	CorrelatorOptions.MaxEvents               10       default
//	CorrelatorOptions.MaxIntervalInSeconds    600      default (saturates at the longest
//	                                                   Duration)
//
// The concrete type behind [NewBroadcaster] is [*Broadcaster]; use [New] to
// get it directly, or a type assertion.
//
// # Goroutines
//
// [Broadcaster.StartRecordingToSink], [Broadcaster.StartEventWatcher],
// [Broadcaster.StartLogging] and [Broadcaster.StartStructuredLogging] each
// start one goroutine, the runner, which runs until the returned watch is
// stopped and the events queued before have been handled (a sink's with
// their retries, as in client-go), or the broadcaster shuts down (a write
// still in flight when a bounded Shutdown gives up ends on its own). A
// sink's runner correlates its events in order, on its own goroutine, and
// hands the writes to up to [WithWriters] writer goroutines (default
// [DefaultWriters]; client-go writes one event at a time): the writes of
// one Event, retries included, one at a time and in order (it is created
// before it is patched), those of other Events in parallel. A failing API
// server delays only that sink, and an Event whose writes are retried
// holds back only itself; [WithWriters](1) writes one event at a time, as
// client-go.
//
// The first call of the returned watch's ResultChan starts a second
// goroutine, which waits for the runner to exit, closes the channel and
// ends; so stopping the watch, or Shutdown, ends both. A watch whose
// ResultChan is never called has only the runner.
//
// [WithContext] registers a callback (context.AfterFunc), not a goroutine:
// when the context ends, the standard library runs it on a goroutine of
// its own, which shuts the broadcaster down (bounded by [ShutdownTimeout])
// and ends; Shutdown unregisters it. A context that is not one of the
// standard library's costs one goroutine more, the standard library's
// watcher of it, until the context ends or Shutdown.
//
// Recorders start none.
//
// # Ordering
//
// Each watcher, and each sink's correlator, receives the events in the
// order they were recorded (one total order across recorders of a
// broadcaster), minus those it dropped. A sink's writes keep that order per
// Event (its create, then its patches, in order); writes of different
// Events may end in another order with more than one writer, as a retried
// one is overtaken ([WithWriters](1) keeps the recorded order for all). A
// sink or watcher started after an event was recorded does not receive it.
package record
