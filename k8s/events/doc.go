// Package events is a drop-in replacement for client-go's tools/events
// (events.k8s.io/v1 events), built on the fanout event pipeline
// ([fanout.Recorder]).
//
// A controller switches by changing one import path:
//
//	import "k8s.io/client-go/tools/events"              // before
//	import "github.com/fanout-go/fanout/k8s/events"     // after
//
// Every exported identifier of client-go's package exists here with the
// same signature. The interfaces that other code passes around
// ([EventRecorder], [EventRecorderLogger], [AnnotatedEventRecorder],
// [EventBroadcaster], [EventSink], [EventBroadcasterAdapter]) are type
// aliases of client-go's, so values flow unchanged between this package,
// client-go and libraries built on it. [NewBroadcaster], [EventSinkImpl],
// [NewEventBroadcasterAdapter], [FakeRecorder] and [GetFieldSelector] are
// this package's own.
//
//	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
//	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil { ... }
//	defer broadcaster.Shutdown()
//	recorder := broadcaster.NewRecorder(scheme.Scheme, "example.com/my-controller")
//	recorder.Eventf(pod, nil, corev1.EventTypeWarning, "BackOff", "Restart", "restarting %s", name)
//
// The events written, their names, series counts and patch bytes are
// client-go's: a differential test plays the same scripts against both
// implementations and compares every sink call.
//
// # Differences from client-go
//
// What client-go does wrong, or does not do, and this package does:
//
//   - No goroutine per event. client-go up to v0.37 (and v0.38.0-alpha.0)
//     starts one goroutine per recorded event and another per sink write
//     (millions in a busy kube-scheduler, kubernetes/kubernetes#140393);
//     v0.38.0-alpha.2 no longer does (#140448, #140868). Here a recorder builds
//     the event and queues it on the caller's goroutine without ever
//     blocking; a full queue drops the event, counted.
//   - Writes bounded per sink ([WithWriters], 32 by default), one at a time
//     and in order per Event or series, with client-go's retries on the
//     writer's goroutine. A failing API server delays that sink's queue
//     (which then drops new events, counted) instead of piling up
//     goroutines; an Event whose write is retried holds back only itself:
//     events of other Events recorded during its retry pause are written
//     meanwhile, those of the same Event after it. [WithWriters](1) writes
//     one event at a time.
//   - A bounded series cache ([WithCacheSize], default 4096 keys, least
//     recently seen forgotten first); client-go's grows without bound.
//   - No lock held during API calls: the refresh and finish passes copy
//     what they write under the lock, write without it, and check the entry
//     again before changing it; occurrences recorded meanwhile are merged
//     at once and their count is kept.
//   - Counters for everything ([Broadcaster.Stats], a [eventstats.Source]):
//     events recorded, written, merged into series, failed attempts, and
//     every drop by cause. client-go drops silently.
//   - [Broadcaster.Flush] waits until every event recorded before it was
//     written, merged, skipped or dropped.
//   - [Broadcaster.ShutdownContext] is bounded by its context, and
//     [Broadcaster.Shutdown] by [ShutdownTimeout] (5 s): no write is
//     retried after it, each queued event gets at most one more attempt,
//     and when the context ends the rest is dropped (counted as each sink's
//     or watcher's call in flight returns; queued in Stats until then) and
//     the writes in flight are cancelled. After Shutdown the Start methods
//     return an error and recorders count events as refused; nothing
//     panics. client-go leaves its maintenance goroutines running until
//     the recording context ends.
//   - Shutdown finishes the open series: each series holding occurrences
//     not yet written (the third and later ones, see below) gets a last
//     write with its final count, within the shutdown's bound. client-go
//     never writes them, so that the API server keeps the count of the
//     last refresh and the rest is lost silently; here, after a Shutdown
//     that returned nil, none are lost, and when the last write fails or
//     does not fit in the bound they are counted as dropped.
//   - Invalid input never panics: a nil or typed-nil object, an object
//     whose kind no scheme knows, a nil scheme, a type other than Normal
//     or Warning are logged (with client-go's messages) and counted as
//     Invalid. A panicking watcher handler drops one event (counted)
//     instead of crashing the process.
//   - [FakeRecorder] never blocks for long: when its channel is full it
//     waits up to [FakeRecorderWait] for a reader, then discards the
//     string and counts it ([FakeRecorder.Dropped]).
//   - Each StartRecordingToSink call has its own series cache. client-go
//     shares one cache between calls, so that two calls on one broadcaster
//     turn every event into a series of two writes. The other side of it:
//     recording stopped and started again on one broadcaster (a leader
//     that regains its lease) starts its series afresh here, a new Event
//     for an occurrence that client-go would patch into the series it
//     recorded before the stop.
//   - A related object whose reference is the caller's *ObjectReference,
//     and the annotations map, are copied into the event rather than
//     shared with the caller.
//
// # What the bounds cost
//
// Each bound above has an effect that client-go, unbounded, does not show:
//
//   - A burst larger than a sink's queue (1000 events, [WithQueueLength])
//     drops the excess, counted as DroppedFull, even when the API server
//     is healthy but slower than the burst: 1500 distinct events recorded
//     at once into a sink taking 5 ms per write are 1001 written and 499
//     dropped, where client-go writes all 1500 (from 1500 goroutines).
//     Give a recorder that bursts a longer queue.
//   - More than 4096 event keys within the 6 minutes a key is kept
//     ([WithCacheSize]) evict the least recently seen: a key seen again
//     after its eviction starts a new event (a create) where client-go
//     would have patched its series.
//   - Shutdown waits, up to [ShutdownTimeout], for the sinks and watchers
//     to handle what is queued, and drops what they have not reached by
//     then (counted once the call in flight returns; a handler that never
//     returns leaves its events queued in Stats): a watcher that takes 1 s
//     per event, with 10 queued, gets about 5 of them. client-go's Shutdown
//     returns at once and its handler goroutine goes on receiving all 10
//     afterwards.
//   - Shutdown called from inside a watcher's handler waits for that very
//     handler, so it returns only after ShutdownTimeout: call it on
//     another goroutine there (go b.Shutdown()). client-go's returns at
//     once. A watcher's own stop function returns at once in both.
//
// # Goroutines
//
// A recorder starts none. [Broadcaster.StartRecordingToSinkWithContext]
// starts two: the sink runner and the series maintenance goroutine; both
// end when its context ends or at Shutdown. [Broadcaster.StartEventWatcher],
// [Broadcaster.StartLogging] and [Broadcaster.StartStructuredLogging]
// start one each, ended by the function they return or at Shutdown. So the
// number of goroutines is bounded by the sinks and watchers started, never
// by the events recorded. A context that is not one of the standard
// library's (StartRecordingToSink's stop-channel context, say) costs one
// more goroutine per sink, for the standard library to watch it.
//
// # The series lifecycle
//
// Each sink groups events by key: type, action, reason, reporting
// controller and instance, regarding object and related object; not the
// note. For each key:
//
//  1. The first occurrence is created.
//  2. The second turns the cached first event into a series,
//     Series{Count: 2, LastObservedTime: now}, written as a strategic merge
//     patch of the first event (from the event without Series to the event
//     with it); a patch answered 404 becomes a create with the resource
//     version cleared, and an AlreadyExists answer to that create is
//     retried.
//  3. Later occurrences only bump the cached count and last observed time
//     (counted as Merged, not written on their own).
//  4. Every 30 minutes, refresh re-writes every open series with its
//     current count, so that the API server keeps it.
//  5. Every 6 minutes, finish writes each series not seen for more than 6
//     minutes with its final count and forgets it, and forgets events that
//     never became a series once they are more than 6 minutes old; the
//     next occurrence of a forgotten key starts again at 1.
//  6. At Shutdown, once the sink's queue is done, every series holding
//     occurrences not yet written is written with its final count and
//     forgotten (not when the recording context ends first: its writes
//     end with it).
//
// The series are the core [fanout.Correlator] configured as client-go's:
// a merging dedup stage keyed as above ([fanout.DedupStage].WriteFirst 2),
// whose open records refresh and finish write ([fanout.Correlator.WriteOpen]).
// Refresh and finish make one attempt per series, as client-go, on the
// maintenance goroutine, a period after their previous run ended (as
// client-go's wait.UntilWithContext; its runs when recording starts find
// nothing to do, and are skipped). A series the cache evicts is forgotten
// like a finished one, without its final write.
//
// Writes are classified as client-go's: a request that cannot be built
// and API status errors are final (AlreadyExists on a create is logged
// quietly); anything else (transport errors, an unexpected object) is
// retried, 12 tries in all. Errors are logged with the logger of the
// context given to StartRecordingToSinkWithContext, a recorder's errors
// with its logger (klog.Background() unless set with WithLogger).
//
// # Defaults
//
//	setting                      default                     option
//	---------------------------  --------------------------  -----------------------------
//	tries per write              12                          -
//	pause between tries          10 s + up to 25% jitter     [WithSleepDuration]
//	queue per sink and watcher   1000 events                 [WithQueueLength]
//	series cache per sink        4096 keys (client-go: none) [WithCacheSize]
//	series finished after idle   6 min, checked every 6 min  -
//	open series refreshed        every 30 min                -
//	Shutdown bound               5 s ([ShutdownTimeout])     [Broadcaster.ShutdownContext]
//
// # Options
//
// The repository's configuration convention (see "Configuration" in the
// core's package doc), shared with [github.com/fanout-go/fanout/k8s/record]:
// where client-go has the setting, its rule holds, for drop-in
// compatibility (a negative pause between tries means none). Where
// client-go has not, a value no setting can mean is an error that [New]
// returns ([NewBroadcaster], whose client-go signature returns none, takes
// no options): [WithQueueLength] takes 1 to [fanout.MaxQueueLength], and
// 0 is neither the default nor the core's hand-off queue; [WithCacheSize]
// takes 0 (the default) or more. The defaults are the core's
// ([fanout.DefaultRetryPolicy], [fanout.DefaultRecorderQueueLength],
// [fanout.DefaultCacheSize]), which are client-go's.
//
// # Counters
//
// [Broadcaster.Stats] accounts for every event: for each sink and watcher
// it ends up in exactly one of Written, Merged or a Dropped counter once
// it leaves the queue, or in Invalid or Refused before it is queued.
// Occurrences merged into a series and then lost (the cache evicted the
// series, the API server rejected its final write, or recording ended
// with the series open) move from Merged to DroppedFull, DroppedRejected
// or DroppedShutdown: the series correlator reports them to its sink
// runner ([fanout.LossCounter]), so the core recorder's counters include
// them. [Broadcaster.SeriesEvicted] counts the evicted series. Register
// [github.com/fanout-go/fanout/k8s/metrics.NewCollector] (a separate module)
// to export them to Prometheus.
package events
