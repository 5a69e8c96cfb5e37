// Package fanout is a typed, in-process publish/subscribe fan-out: a
// [Broadcaster] hands every published value, in one total order, to every
// registered [Watcher].
//
// It keeps the contracts of k8s.io/apimachinery/pkg/watch.Broadcaster (the
// names Watch, WatchWithPrefix, Action, ActionOrDrop, Shutdown, ResultChan,
// Stop, FullChannelBehavior and the "broadcaster already stopped" error are
// the same) and fixes its defects: it is generic, it never hangs in Shutdown,
// no value is special, drops are counted, and the full-queue strategy is a
// pluggable, per-watcher [FullChannelBehavior].
//
//	b := fanout.New[Event]()                 // queue 1024, WaitIfChannelFull
//	w, _ := b.Watch()
//	go func() {
//		for ev := range w.ResultChan() {  // or w.Recv / w.Next / w.All
//			handle(ev)
//		}
//	}()
//	_ = b.Action(Event{...})
//	b.Shutdown()
//
// # Compared with k8s's watch.Broadcaster
//
// What differs from k8s.io/apimachinery/pkg/watch.Broadcaster, point by
// point (the figures are the repository's benchmark harness's, bench/):
//
//   - Values: a watch.Event{Type, runtime.Object} there; any T here.
//   - Goroutines: one distribution goroutine per broadcaster there; none
//     here: the publisher delivers, and an idle broadcaster uses no CPU.
//   - Shutdown with an unread watcher that waits when full: it hangs for
//     ever there; here it returns at once, and waiting publishers get
//     [ErrStopped].
//   - One slow watcher under WaitIfChannelFull: there it blocks every
//     watcher, and Watch and Stop too; here it holds back the publishers
//     only, while Watch, Stop and the other watchers' readers go on.
//   - The full-queue strategy: one per broadcaster there, wait or drop;
//     here one per watcher: wait, drop, drop-oldest, wait with a timeout,
//     evict, or your own ([FullChannelBehavior]).
//   - Drops: silent there; here counted per watcher and reason, with an
//     optional callback ([WithDropHandler]).
//   - Special values: an event of type "internal-do-function" crashes the
//     process there; no value is special here.
//   - Errors: fmt.Errorf strings there; here sentinels for errors.Is
//     ([ErrStopped] keeps k8s's text).
//   - A fast read path: none there; here [Watcher.Recv] takes batches from
//     a shared ring, written once per publish whatever the number of
//     watchers.
//   - An idle watcher with a queue of 100: about 3.8 KB there (3,758 B
//     measured); about 290 B here (285 B measured among 100,000 pull
//     watchers), or its channel's buffer once ResultChan is used.
//   - When Action returns: there, once the value is in the broadcaster's
//     incoming queue (25 values; queueLength for NewLongQueueBroadcaster),
//     before any watcher has it, so 26 more Actions return after a waiting
//     watcher is full (the queue, and the value its loop holds), and with
//     queue length 0 a goroutine may publish and then read its own watcher.
//     Here, once every watcher that waits has room for it: at queue length
//     0, once its consumer takes it, so a goroutine that publishes before it
//     reads its own hand-off watcher waits for ever; give such a watcher a
//     queue of 1 or more.
//   - ActionOrDrop: false there only when that incoming queue is full, and
//     under WaitIfChannelFull a value it took reaches every watcher. Here
//     false as soon as a watcher that waits is full (nothing is queued
//     beyond the watchers' queues); and a hand-off watcher (queue length 0)
//     that waits, whose consumer is not ready at that instant, misses a
//     value ActionOrDrop accepted, counted as [DropFull], where k8s's loop
//     would wait for it: an unbuffered channel's receiver cannot be
//     reserved ahead of the send. Where ActionOrDrop must be lossless, give
//     the watcher a queue of 1 or more.
//   - Registration is ordered with values, as in k8s (see below).
//
// # Ordering guarantees
//
//   - There is one total order of accepted values, and every watcher
//     receives the values it gets in that order.
//   - Registration is ordered with values: a watcher returned by Watch
//     receives exactly the values accepted after Watch took effect, even with
//     concurrent publishers. Within that order, a value is "accepted" when the
//     publisher takes its place in it; see "Waiting" below for when that
//     happens relative to waiting.
//   - WatchWithPrefix delivers the prefix first, then the live values, with
//     no gap and no duplicate.
//   - [WithReplay] delivers the last k accepted values first (kept by
//     [WithHistory]), then the live values, with no gap and no duplicate:
//     the replayed values are exactly the k that precede the first live one
//     in the total order. With a prefix too, the prefix comes first, then
//     the replayed values, then the live ones.
//   - Concurrent publishers (Action, ActionContext, ActionOrDrop and
//     ActionBatch from any number of goroutines) are ordered by the
//     broadcaster's lock; values of a single publisher keep their order.
//   - A batch ([Broadcaster.ActionBatch]) is contiguous: no other publisher's
//     value is accepted between two of its values, and each watcher's
//     behaviour applies to each value as if it had been published alone.
//   - Across watchers, the moment at which each one receives a given value
//     is unspecified.
//
// # Waiting
//
// A watcher that waits when full ([WaitIfChannelFull], or a custom behaviour
// returning [VerdictWait]) makes the publisher wait, and a value is accepted
// only once every such watcher has room for it: the publisher waits before
// the value takes its place in the order, never after. A watcher registered
// while the publisher waits therefore receives the value.
//
// Stop of the watcher being waited for releases the publisher from it: that
// watcher left before the value was accepted. If Shutdown or the publish
// context ends the wait, the publish returns the error and the value is not
// accepted (it is not counted in [Stats].Accepted); every value that was
// accepted stays readable after Shutdown. Who may already hold a value that
// was not accepted depends on the call:
//
//   - [Broadcaster.ActionContext] with a context that can end, and
//     [Broadcaster.ActionOrDrop]: no watcher with room receives the value
//     before it is accepted, so a cancelled or refused publish reaches none
//     of them. (A channel watcher that was itself full and took the value
//     while the publisher went on waiting for another full one keeps it.)
//   - [Broadcaster.Action]: channel watchers with room are handed the value
//     before the publisher waits for a full channel watcher, so that their
//     consumers keep working meanwhile, as with a loop of channel sends;
//     holding it back made Action 1.2 to 1.4 times slower at 100 to 1000
//     watchers. Only Shutdown can end this wait, and then they keep the
//     value as the last one before their channel closes. Watchers read
//     with the pull methods never see a value before it is accepted.
//
// A publisher that waits for a pull watcher's room does not hold anything
// that other publishers need: when the full watchers have all made room,
// every publisher waiting for them is woken (once, by the last of them),
// and the lock orders them. A publisher that waits for a channel watcher,
// asks a user's behaviour ([FullChannelBehavior].OnFull), or waits in the
// middle of a batch holds the publish turn: the other publishers queue
// behind it, in order. ActionOrDrop never overtakes a waiting publisher: it
// returns false while one waits.
//
// A bounded wait ([WaitTimeoutIfChannelFull], or a [Decision] with a Timeout)
// is measured from when the publish call first had to wait, including for
// other publishers ahead of it, so a publish waits at most the longest
// timeout, however many watchers are full. A negative Timeout means no wait.
//
// While a publisher waits, Watch, Stop, ResultChan, Stats and the readers of
// all watchers proceed.
//
// # Read paths and their cost
//
// A watcher can be read through [Watcher.ResultChan], a channel as in k8s, or
// with the pull methods [Watcher.Recv] (a batch), [Watcher.Next] (one value)
// and [Watcher.All] (an iterator).
//
// Every watcher read with the pull methods reads the broadcaster's shared
// ring, whatever its behaviour, queue length, prefix or replay: the publisher
// writes each value once, whatever the number of watchers, and a reader
// copies a batch out under one uncontended lock. Only a watcher with queue
// length 0 (a hand-off) has a channel from the start. The ring grows to twice
// the largest queue length and to the history, at least 64 values.
//
// What a publisher pays per value on the ring is O(1), whatever the number
// of watchers, as long as no watcher is full: it stores the value and
// advances the head under the lock (or, on the fast path, holding only a bit
// of the head), and wakes the readers that were parked after unlocking.
// A reader that parks in the instant a fast-path publisher is storing may be
// missed by that publisher; it is woken by the next publish, or after at
// most 50 µs if none comes. When a watcher is full:
//
//	behaviour                              publisher's cost while it is full
//	-------------------------------------  ------------------------------------------------
//	WaitIfChannelFull                      waits; woken once when the full ones made room
//	DropIfChannelFull, no drop handler     nothing: drops settled lazily (see below)
//	DropOldestIfChannelFull, no handler    nothing: drops settled lazily
//	the same with a drop handler           O(1) per value: the drop is decided and reported
//	EvictIfChannelFull                     O(1), once: the watcher is closed
//	WaitTimeoutIfChannelFull, custom       O(1) per value, plus the wait or the OnFull call
//
// Lazily settled drops are counted as soon as they happen ([Watcher.Stats]
// and [Broadcaster.Stats] work them out from the sequence numbers) and
// settled, that is reported to the drop handler if any, when the watcher is
// next read, its stats are taken, it is stopped, or its oldest values are
// about to be overwritten: then the publisher moves the values it still
// holds off the ring, at most once per ring's worth of values. A publisher
// that finds a lossy reader lapped (it lost values since the last lap)
// yields its processor once after unlocking ([runtime.Gosched]): a reader
// that is merely slow, not stalled, gets to run before it loses more, and a
// stalled one costs the publisher one yield per ring's worth of values.
//
// The first call of ResultChan gives the watcher its own channel (moving any
// queued values into it). A channel watcher costs one non-blocking channel
// send per value, under the lock: as a loop of channel sends.
//
// Idle, a pull watcher costs about 290 bytes (no goroutine, no channel;
// 285 B each measured with 100,000 watchers); a channel watcher adds its
// channel's buffer (queue length times the size of T).
//
// # Goroutines
//
// A Broadcaster and its Watchers start no goroutines. Values are delivered by
// the publishing goroutine, inside Action, ActionContext, ActionOrDrop or
// ActionBatch; waiting readers are parked until a publisher wakes them (or,
// rarely, a 50 µs bound ends the park; see above). So an
// idle broadcaster uses no CPU (no ticker, no polling), nothing needs to be
// stopped for goroutines to be reclaimed, and Shutdown has no goroutine to
// wait for: it returns as soon as it has closed intake, released waiting
// publishers and closed the watchers. It never waits on a consumer.
//
// The callbacks a user supplies run with no lock of the broadcaster held:
//
//   - [FullChannelBehavior].OnFull runs on the publishing goroutine while it
//     holds the publish turn, so its calls never overlap. It may call the
//     broadcaster and its watchers, but not a publish method that waits (it
//     would wait for itself).
//   - The [WithDropHandler] function runs on whichever goroutine settles
//     the drop: the publisher, a reader, or the caller of Stats, Stop or
//     Shutdown, possibly concurrently and after the publish returned. It may
//     call anything, publishing included.
//
// A panic in either is recovered and counted in [Stats].Panics; a panic in
// OnFull makes that watcher miss that value ([DropPanic]).
//
// A [Recorder] starts one goroutine per runner (see "The event pipeline"
// below), and up to n more for a runner with n writers ([WithWriters],
// [BatchConfig].Writers), started as keys need them; [Recorder.Shutdown]
// ends them.
//
// # Full-queue policies
//
// The broadcaster's [WithFullChannelBehavior] sets the default; Watch can
// override it per watcher with the same option. Every value a watcher misses
// is counted per reason in [Watcher.Stats], in total in [Broadcaster.Stats],
// and reported to the [WithDropHandler] function.
//
//	behaviour                        full queue                          lossless  publisher waits  drop reason
//	-------------------------------  ----------------------------------  --------  ---------------  -----------
//	WaitIfChannelFull (default)      publisher waits for room            yes (*)   yes              -
//	DropIfChannelFull                watcher misses the new value        no        no               full
//	DropOldestIfChannelFull          oldest queued value is discarded    no        no               oldest
//	WaitTimeoutIfChannelFull(d)      wait up to d, then miss the value   no        up to d          timeout
//	EvictIfChannelFull               watcher is closed, Err=ErrEvicted   no        no               evicted
//	your FullChannelBehavior         any of the above, per value         -         -                -
//	  ... whose OnFull panics        watcher misses the value            no        no               panic
//
// (*) But for [Broadcaster.ActionOrDrop], which never waits: a hand-off
// watcher (queue length 0) whose consumer is not ready misses its value,
// counted as full. With a queue of 1 or more it refuses instead, and
// nobody gets the value.
//
// Queue length is exact: [WithQueueLength](5) with DropIfChannelFull means an
// unread watcher holds exactly the first 5 values. Length 0 is a hand-off:
// nothing is queued, a value reaches the watcher only by being handed to a
// consumer blocked in a receive, and with WaitIfChannelFull the publisher
// waits for that consumer.
//
// # Stopping
//
// [Watcher.Stop] and [Broadcaster.Shutdown] are idempotent, safe from any
// goroutine, never wait on a consumer and never panic. After either, the
// values already queued for a watcher stay readable; then its channel closes
// and the pull methods return the reason ([ErrWatcherStopped], [ErrStopped] or
// [ErrEvicted], also given by [Watcher.Err]).
//
// # Topics
//
// [Topics] is a family of broadcasters keyed by topic, with the guarantees
// above within each topic. [Topics.Publish] reaches the watchers of that
// topic ([Topics.Watch]) and those of several topics that include it
// ([Topics.WatchTopics], [Topics.WatchAll]). A topic exists while it has
// watchers or a history, and costs nothing otherwise: publishing to it
// counts the value as unheard. When its last watcher stops or is evicted,
// a topic without history goes away ([TopicsStats].Retired), and one that
// comes back later starts afresh, its counters at zero. After Shutdown the
// topics stay as they were.
//
// Publishing costs what publishing to one [Broadcaster] per topic, kept
// in a map by hand, costs: a publish takes no lock of the family's and
// writes nothing shared with the other topics' publishers; it looks the
// topic up in a map that only the creation and retirement of topics
// replace. A [TopicPublisher] ([Topics.Publisher]) keeps its topic's
// broadcaster, for a publisher that publishes to one topic over and over;
// it creates nothing, so that a topic without watchers still costs
// nothing. [Topics.PublishMessages] publishes a batch across topics: each
// topic's values in their order and contiguously, as one
// [Topics.PublishBatch] of that topic.
//
// A watcher of several topics ([TopicsWatcher]) is one watcher per topic
// sharing one wake-up channel, so that its reader parks once for all of
// them. It is read with Recv, Next or All, or through a channel for a
// select ([TopicsWatcher.ResultChan]): the channel's goroutine moves the
// values into it, holding one more while it is full, and Stop leaves what
// it did not send to Recv. Its ordering guarantees:
//
//   - Each topic's values come in that topic's order, and registration is
//     ordered with each topic's values: for each of its topics, it receives
//     exactly the values accepted after its watcher of that topic
//     registered (WatchTopics registers them all before it returns);
//     WatchAll also receives the values of every topic that appears later,
//     from that topic's first value.
//   - Values of different topics come in no particular order: their
//     publishers are not ordered with each other. Recv takes the topics in
//     turn, so that a busy topic does not starve the others.
//   - Each topic's watcher has its own queue and full-queue strategy (the
//     options apply to each); its counters are in [TopicsWatcher.Stats].
//     One evicted evicts the whole watcher: the others stop once its reader
//     has seen the eviction, and it closes with [ErrEvicted], so that no
//     topic goes missing silently.
//
// # Names
//
// [WithName] names a watcher for people: the name is in its
// [WatcherStats], in every [Drop], [FullState] and [WaitReport] about it,
// in what is logged about it, and in the label watcher of its metrics. A
// [Recorder] names each runner's watcher "sink <type>" or "handler".
// Names need not be unique; [Watcher.ID] is.
//
// # Who blocks the publisher
//
// A publisher that waits for a full lossless watcher says nothing by
// itself; a reader that publishes into the broadcaster it reads, with its
// own queue full, waits for itself for ever. [WithWaitReport] makes the
// broadcaster report a publish that has waited longer than a threshold:
// which watcher (its ID and [WithName]), its queue, how long, and how many
// goroutines are parked reading it ([WaitReport]: a publisher waiting for
// its own watcher sees it with none); [LogWaitReports] logs them with slog,
// and [Stats].WaitReports counts them. It costs nothing until a publisher
// has to wait.
//
// [Broadcaster.Snapshot] shows the same at any moment, with or without
// WithWaitReport: each publish call waiting now, the watchers it waits
// for, and every watcher's counters, strategy and parked readers
// ([Snapshot]); [Topics.Snapshot], [Recorder.Snapshot] and
// [Runner.Snapshot] do so for what is built on broadcasters. The package
// github.com/fanout-go/fanout/debug serves them as a live web page.
//
// # Filters
//
// A watcher registered [WithFilter] receives only the values its filter
// keeps, and its queue length, waits and drops are about kept values;
// rejected ones are counted apart ([WatcherStats].Filtered). The filter
// runs with no lock held, once per value, where it costs least:
//
//   - A watcher read through the pull methods is a ring reader like any
//     other, and its reader asks the filter as it reads: publishing costs
//     nothing per filtered watcher while the reader keeps up. A rejected
//     value takes a queue slot until the reader or a publisher has asked
//     about it, so [WatcherStats].Queued counts those values too, and
//     [Broadcaster.Taken] passes them then. The reader filters in the
//     buffer it reads into: past the n values [Watcher.Recv] returns, buf
//     may hold values the filter rejected.
//   - A publisher that finds such a watcher full, with values the filter
//     has not seen, sifts them itself (holding the publish turn: no other
//     value is accepted meanwhile), unless the watcher is lossless and a
//     goroutine is reading it, which makes room by itself. Then the watcher
//     is full only if the kept values fill its queue, and the publisher
//     asks the filter about the value in hand before it waits for it or
//     drops anything.
//   - A watcher read through [Watcher.ResultChan] is a channel watcher: its
//     publishers ask the filter about each value before the channel pass,
//     and send only the kept ones.
//
// So a watcher that rejects most values costs its reader one filter call
// per value instead of a delivery, and never holds a publisher back for a
// value it rejects; a slow reader makes the publishers sift for it.
// A filter that panics makes its watcher miss that value ([DropPanic],
// counted in [Stats].Panics too); it takes nothing else down.
//
// # Metrics
//
// [Broadcaster.Metrics] and [Recorder.Metrics] return the counters of
// [Broadcaster.Stats], [Watcher.Stats] and [Recorder.Stats] as [Metric]
// samples, named and typed for Prometheus (fanout_*_total counters and
// gauges), so that any [MetricSource] (these two and the NATS module's
// bridges) is exported by the collector of the module
// github.com/fanout-go/fanout/metrics; this package does not depend on the
// Prometheus client. Per-watcher samples are labelled watcher_id and
// watcher (the [WithName] name); a recorder's runner is a watcher of its
// broadcaster named "sink <type>" or "handler", and its own samples
// (fanout_runner_*) carry the same two labels, while the recorder's totals
// (fanout_recorder_*) keep the counts of runners that have exited. The
// samples are read when Metrics is called, at the cost of the Stats calls
// behind them; nothing is counted for them on the publish path.
//
// # Taken values
//
// A bridge that must acknowledge values upstream only once they are safe
// (a durable NATS or Kafka consumer, say) publishes with
// [Broadcaster.ActionSeq] or [Broadcaster.ActionBatchSeq], which return
// each value's sequence number in the total order, and asks
// [Broadcaster.Taken] how far the lossless watchers have got:
//
//	read path                          a value is taken when
//	---------------------------------  -----------------------------------------
//	Recv, Next, All                    the call returned it
//	ResultChan                         the consumer received it from the channel
//	either, registered WithCommit      the consumer called Commit after that
//
// Only [WaitIfChannelFull] watchers hold Taken back, each only for values
// accepted after it registered and only until it is stopped or evicted;
// the lossy behaviours may lose values anyway. After Shutdown they hold it
// until they have read what stays queued. Taken costs a scan of the
// lossless watchers, and nothing on the publish path when nobody calls it.
// A value that was taken but not yet handled when its process crashes is
// lost to that watcher unless it was registered [WithCommit] and the
// upstream is acknowledged from Taken only: then "taken" means "done".
//
// # Values
//
// No value of T is special: the broadcaster never inspects values, so
// there is no marker value that could be mistaken for an internal one. The
// shared ring keeps references to the last values published (up to the
// ring's size) until they are overwritten.
//
// # Contexts
//
// Only calls that can block take a context, and it must not be nil: pass
// context.Background() for no deadline. A nil context is a mistake that the
// call reports, as an error naming it, without doing anything else
// (staticcheck's SA1012 finds most of them before they run).
// [Watcher.All] and [TopicsWatcher.All] return an iterator, which cannot
// return an error: a range over one made with a nil context ends at once,
// taking nothing, and from then on the watcher's Err returns the error
// naming the nil context, so that the loop is not mistaken for a closed,
// empty watcher. It does not panic, as the standard library does for a nil
// Context: the package reports bad input as errors.
//
// # Options
//
// A broadcaster and its watchers take [Option]s; a [Recorder] takes
// [RecorderOption]s. [WithQueueLength] and [WithDropHandler] are both
// ([CommonOption]). An option given to the wrong constructor does not
// compile; an invalid value given to [New] is returned by every method
// that returns an error, Action included.
//
// # Configuration
//
// One convention holds in every module of the repository (this package,
// k8s/record, k8s/events, nats and the exporter), and each package doc
// states it in these terms:
//
//   - Settings are options (WithX) or fields of a Config struct. An unset
//     option or a zero field takes the documented default; zero means the
//     default only where the doc says so.
//   - A value no setting can mean is never silently changed: the
//     constructor reports it. One that returns an error returns it
//     ([NewRecorder], [Recorder.StartSink], [StartBatchSink], events.New,
//     fanoutnats.Forward, the exporter's configuration). One whose
//     signature, without an error, is that of the API it stands in for
//     keeps it for every later call that returns an error ([New], after
//     k8s's watch.NewBroadcaster) or, if no later call returns one, panics
//     with it at once (record.New and record.NewBroadcaster, after
//     client-go; as time.NewTicker does; record.NewChecked returns it).
//   - Where client-go or k8s has the same setting, its rule holds, for
//     drop-in compatibility (client-go's CorrelatorOptions: a zero field
//     means the default; WithSleepDuration: a negative pause means none).
//   - One name means one thing. [WithQueueLength](0) is a hand-off queue
//     here; the k8s adapters' WithQueueLength refuses 0 (its former
//     meaning there was "the default").
//
// # The event pipeline
//
// On top of the broadcaster sits an event pipeline for any Go service, the
// generic form of client-go's EventRecorder, EventBroadcaster and
// EventCorrelator:
//
//	Record(v) ──► Broadcaster ──► runner ──► Correlator ──► Sink.Create / Sink.Update
//	 caller's       (owned by       (one      aggregate,     with retries
//	 goroutine,     the Recorder)   goroutine dedup, spam
//	 never blocks)                  each)
//	                          └───► runner ──► handler (StartHandler, StartSlog)
//	                          └───► plain watchers (Recorder.Watch)
//
// In detail:
//
//   - [Recorder.Record] (and [Recorder.RecordBatch], many values for the
//     cost of one publish) stamps the value ([WithStamp], [WithClock]) and
//     publishes it on the caller's goroutine without waiting for any
//     consumer; any number of goroutines may record at once. Each runner has its own queue ([DefaultRecorderQueueLength]
//     values) that drops new values when full, for that runner only.
//   - [Recorder.StartSink], [Recorder.StartHandler] and [Recorder.StartSlog]
//     each start one goroutine, the runner, which takes values from its queue
//     in order and handles one at a time. Goroutines are bounded by runners,
//     never by values: a failing sink retries ([RetryPolicy]) on its own
//     goroutine and delays only its own queue. A sink runner may write with
//     several writers ([WithWriters]; see "Writers" below).
//   - A sink runner passes each value through its [Correlator] (give each
//     sink its own, as client-go does), skips what the spam filter rejects,
//     and calls [Sink].Create for a first occurrence or [Sink].Update for a
//     repeat, then tells the correlator what was stored ([Correlator.Observe]).
//     Any [SinkCorrelator] can stand in for the Correlator.
//   - A correlator may fold a value into an earlier record to be written
//     later ([Correlation].Merged, counted in [RunnerStats].Merged, not as a
//     drop): the Correlator does so with a merging dedup stage
//     ([DedupStage].Merge and WriteFirst), as the Kubernetes adapter's
//     events.k8s.io series do. The owner writes such open records from a
//     goroutine of its own ([Correlator.WriteOpen]: refresh them, finish
//     the idle ones) and abandons them when the sink stops
//     ([Correlator.Purge]); the lock is never held during a write. Merged
//     values that are never written after all (evicted from a full cache,
//     a final write rejected, abandoned) and failed writes are reported to
//     the runner ([LossReporting], [LossCounter]), so that its counters
//     hold them: nothing is lost silently, and nothing patches the counts.
//   - Every value that does not reach a sink or handler is counted by
//     [DropReason] in [Recorder.Stats] and [Runner.Stats] and reported to the
//     [WithDropHandler] function and the [WithLogger] logger: full queue,
//     refused, spam, rejected (not retryable or panicked), retries exhausted,
//     shutdown. Nothing is lost silently.
//   - [Recorder.Flush] waits until every runner has written, skipped or
//     dropped every value recorded before the call.
//   - [Recorder.Shutdown] stops intake, ends retry pauses at once (each
//     value left gets at most one more attempt), and waits for the runners to
//     exit or for its context to end, when it cancels the sinks' context and
//     drops what is left. [Runner.Stop] stops one runner the same way, each
//     queued value getting at most one more attempt, without waiting;
//     [Runner.Done] tells when it has exited.
//
// The same runner drives a [BatchSink] on any watcher ([StartBatchSink]):
// batches of values, one write loop, the same [RetryPolicy] (with
// exponential backoff, [RetryPolicy].MaxSleep) and the same drop reasons,
// with hooks for routing, idempotency and checkpoints ([BatchConfig]).
// The repository's event exporter runs its sinks on it.
//
// # Writers
//
// By default a runner writes one value (or batch) at a time, in queue
// order: a sink whose round trip takes 5 ms writes 200 values a second.
// With n writers ([WithWriters] for a sink runner, [BatchConfig].Writers
// and Key for a batch runner) it makes up to n writes at once, in order per
// key:
//
//   - The runner's goroutine takes values from the queue in order, passes
//     them through the Select hook and, for a sink runner, the correlator
//     (so that its decisions are those of one writer: what it skips,
//     merges and counts; but a repeat correlated before the write of the
//     value before it ended refers to that value as it was sent, not as the
//     sink stored it, see [WithWriters]), and appends each to
//     its key's queue. A writer takes the oldest keys that have values and
//     no writer, up to Batch values, holds those keys while it writes, and
//     gives them back; so the values of one key are written one write at a
//     time, in order (a record is created before it is updated), values of
//     other keys in parallel, and a key whose writes fail and are retried
//     holds back only itself and the keys of its batch.
//   - The runner holds at most as many values beyond its queue as the
//     queue is long (at least n × Batch), in flight or waiting for their
//     key; when that many wait, it takes no more, and the queue's
//     full-queue behaviour applies. A burst can thus hold up to twice the
//     queue length before values are dropped.
//   - Every value is still written, dropped with a reason or counted at
//     shutdown ([RunnerStats].Queued counts those waiting for their key,
//     InFlight those being written). [Recorder.Flush] waits for every
//     writer. [BatchConfig].Finished is called in the order the batches were
//     taken, one call at a time, for a batch once it and every earlier one
//     are done: a low watermark, so that a checkpoint never passes a value
//     not yet written.
//   - Goroutines: the runner's, and up to n writers, started as keys need
//     them and ended with the runner.
//
// The Recorder and Correlator start no goroutines of their own; only the
// runners do, and Shutdown (or Stop) ends them. [Correlator.WriteOpen]
// runs on its caller's goroutine. A panic in a sink, handler or
// correlator function drops that one value ([DropRejected]) and the runner
// goes on.
//
// A [DedupStage] may build its keys with AppendKey instead of Key: the key
// is appended to the correlator's own buffer and copied only for a new
// record, so that a repeat costs no key allocation (the Kubernetes
// adapter's events.k8s.io series keys are built so). [Recorder.Flush] is
// what client-go's users asked for in kubernetes/kubernetes#27933. Every
// stage can be switched off or tuned; the caches are bounded LRUs, and the
// clock can be injected ([CorrelatorConfig].Clock, [WithClock]). The
// example of [Recorder] is a runnable pipeline with a sink.
//
// Configured with client-go's key functions and defaults ([DefaultCacheSize]
// keys per cache, 10 distinct messages within 600 s combined into one
// prefixed "(combined from similar events): ", bursts of 25 and one token
// per 300 s, [DefaultRetryPolicy]: 12 tries 10 s apart), the pipeline makes
// client-go's decisions; the Kubernetes adapter module does exactly that. One choice is
// made deterministic: when a group reaches the aggregation threshold,
// client-go forgets an arbitrary local key (map order) and this package the
// oldest one.
package fanout
