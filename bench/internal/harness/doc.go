// Package harness measures github.com/fanout-go/fanout against
// k8s.io/apimachinery/pkg/watch.Broadcaster, the popular in-process peers
// github.com/teivah/broadcast, github.com/kelindar/event and
// github.com/smarty/go-disruptor (and, for
// topics, github.com/cskr/pubsub and watermill's GoChannel), a
// raw-channel baseline and a minimal ring as the ceiling, in one process, and reports the figures as a table,
// JSON Lines and an SVG chart. It is the engine of the fanout-bench
// command.
//
// # Workload
//
// One producer (or several, concurrently) publishes to N watchers, each
// drained by its own goroutine doing no work; every watcher queue holds 100
// values. The payload is a pointer, *[Event]: the throughput cases publish
// one preallocated pointer over and over, so no system pays for boxing
// (k8s carries the same pointer as the runtime.Object of its watch.Event, a
// struct passed by value, which does not allocate either).
//
// # Systems
//
// fanout with each built-in strategy (wait, drop, drop-oldest, evict,
// wait-timeout with [WaitTimeout]), each read both through the pull API
// (Watcher.Recv with a 100-value buffer) and through ResultChan; the k8s
// broadcaster with WaitIfChannelFull and DropIfChannelFull at queue lengths
// 100 and 1000 (built with NewLongQueueBroadcaster, whose incoming queue is
// as long as the watchers'); and raw channels: the producer sends, blocking,
// into N buffered channels of capacity 100. fanout wait pull is also
// measured publishing with ActionBatch, [DefaultBatch] values per call
// ([FanoutBatch], "b16"; published values are counted, not calls).
//
// The peers, each in its idiomatic lossless use: [Teivah]
// (Relay.Notify, blocking sends into each Listener's channel of capacity
// 100), [Kelindar] (event.Publish to event.Subscribe handlers; its
// per-subscriber queue is the library's fixed 50,000, and its subscribers
// are woken by a 500 µs ticker, so it delivers in batches and its latency
// is measured too) and [Disruptor] (a ring of 128, one handler per
// watcher on a goroutine of the library, readers and writer that yield
// rather than park). kelindar has no close that drains: a measurement ends
// with a sentinel value that each handler signals (not counted), then the
// subscriptions are cancelled and the dispatcher closed once the
// subscribers' goroutines have exited. The peer targets compare each peer
// with fanout wait pull at the peer's queue length, measured with one
// producer: kelindar with [FanoutAtKelindarQueue] ("fanout wait pull
// q50000"), go-disruptor with [FanoutAtDisruptorRing] ("fanout wait pull
// q128"), teivah with the harness's queue of 100.
//
// The ceiling reference, [Limit] ("limit q100"): a minimal lossless
// broadcast ring written plainly in the harness ([limitRing], one mutex, a
// head counter, a ring of 100, a read position per reader), read like
// fanout wait pull and parked the same way: the one producer waits while the
// slowest reader is a full ring behind, a reader with nothing to read parks
// on its own channel until the next publish. It is measured in every group
// of one producer; the column "vs limit" is each system's delivered/s over
// limit's, the median of per-repetition ratios.
//
// From [LargeWatchers] (10,000) watchers on, a throughput group measures
// [LargeSystems] only: fanout wait pull, limit, k8s wait q100, the peers
// and raw channels.
//
// # Method
//
// The systems of a group (same N and producers) are measured in the same
// process, interleaved, their order rotated by one at each repetition, and
// medians over the repetitions are reported. Each repetition measures a
// system twice, back to back (in alternating order): a short run of S
// values and a long run of L, and its figures come from the difference,
// (delivered_L − delivered_S) / (t_L − t_S): what a measurement costs once
// (building the system, starting and parking the consumers, the close and
// teardown, kelindar's next tick) cancels, and so does the warm-up as long
// as the short run is past it. S and L are calibrated once per group, by
// probe pairs that are discarded, L growing fourfold per probe: once a
// probe's long run takes half of [Config].Target and its rate (from the
// difference) is within 10% of the previous probe's, itself within 10% of
// the one before ([steadyRates]), the rate is steady
// from the previous probe's short run on, which becomes S; a system still
// unsteady when a probe's long run takes four times the target keeps that
// probe's short run as S. L adds to S what takes about Target at the
// measured rate, and at least 2 S (see [calibrate]). This makes every
// system's figure independent of the window: kelindar/event's rate per
// value grows about fivefold over its first million values at 10 watchers
// (its queues and the heap grow), so a single 60 ms run under-measured it
// threefold against a 700 ms one, while fanout's is steady after a few
// thousand values. A run starts its
// clock at the first publish, once every consumer goroutine is running,
// and stops it when every consumer has received its last value and returned
// (the system is closed once the producers are done; for lossy strategies
// the queues are drained first). Before the next run the harness waits
// until every goroutine of the previous one has exited.
//
// A pair whose windows disagree with its calibration (its difference not
// positive, or its rate not within [MaxWindowDisagreement] of the
// calibrated rate and of its long run's own rate) is measured again, not
// reported; if the second pair disagrees too, the case is calibrated anew
// and measured up to [MaxRemeasures] more times (see [remeasure]). The
// report's warnings name every case the guard measured again.
//
// Figures: delivered values per second (all watchers together), ns per
// publish (the same wall time / values published; the producers' time alone
// is kept too), allocations per published value (runtime.MemStats.Mallocs
// over the second half of the values, the first half being the warm-up),
// drop percentage (deliveries that did not happen, from the consumers'
// counts, so that it is the same measure for every system). Separate measurements
// give publish→receive latency percentiles at a light fixed rate (from one
// producer, and from several sharing the rate) and at a high one
// ([Config].LatencyHighRate, one producer), for every system with one
// producer, with the rate the producers achieved; bytes per idle unread
// watcher (growth of HeapAlloc+StackInuse after runtime.GC; fanout wait
// pull with [Config].IdlePullWatchers, 100,000, the others with
// [Config].IdleWatchers) and the process CPU time of a system whose watchers
// are parked.
//
// # Topics
//
// Kind "topics" measures families of topics: T = [Config].TopicCounts (1,
// 10, 100, 1000) topics with [WatchersPerTopic] (10) watchers each, with
// each of [Config].Producers (1, 4), every watcher reading all of its
// topic, lossless; the figure is delivered values per second, measured as
// the throughput groups are. Each publishing call goes round-robin over
// the topics from a topic of its own and publishes numbered values; every
// reader checks that each call's values come in their order on its topic
// ([Case].OutOfOrder): the same small work per value in every system. A
// run publishes more than the topics' queues hold ([TopicsQueueShare],
// [TopicsFixedFrom]).
// fanout.Topics ([FanoutTopics]: Watch(k) read with Recv) is compared
// with its baseline, one fanout.Broadcaster per topic in a map built by
// hand ([FanoutTopicsByHand]), with kelindar/event routing by event type,
// one type per topic ([KelindarTopics]), github.com/cskr/pubsub/v2
// ([Cskr]: Sub channels of 100, Pub blocking) and watermill's GoChannel
// ([Watermill]), OutputChannelBuffer 100, in both of its lossless uses:
// BlockPublishUntilSubscriberAck ([StrategyAck]: Publish returns once
// every subscriber has acked, in order, bounded) and without it
// ([StrategyAsync]: a goroutine per message and subscriber, unbounded; the
// harness closes GoChannel only once every message is acked), up to
// [WatermillMaxTopics] topics, as cskr/pubsub. The latter
// reorders: it is shown as reordering, and neither ranked nor a target's
// peer. watermill is measured as a user would use it: a new message with a
// new UUID and an 8-byte []byte payload ([WatermillPayload]) per publish,
// every message acked by its watcher.
//
// # Filters
//
// Kind "filter" measures [Config].FilterWatchers (100) watchers, watcher i
// keeping the values v with v%10 == i%10, one producer, lossless, as
// matching values delivered per second: fanout's WithFilter
// ([FanoutFilter]) against watchers that read everything with Recv and
// discard by hand ([FanoutByHand]).
//
// # Replay
//
// Kind "replay" measures what it costs a late joiner to resume: a
// broadcaster with a history of H = [Config].ReplayHistory values that has
// published 2H; each join registers a watcher that starts with the last H
// values and reads them (checking that they are the right ones, in order).
// fanout's WithHistory + WithReplay ([ReplayFanout]) is compared with the
// closest alternatives, fanout's and k8s's WatchWithPrefix given a history
// the application keeps in a ring under its own lock ([ReplayFanoutPrefix],
// [ReplayK8s]). Joins per measurement are calibrated to [Config].Target;
// the systems are interleaved as above; the figures are replayed values per
// second and ns per replayed value (Stop not timed).
//
// # Recording Kubernetes events
//
// A separate comparison, kind "record", measures fanout's k8s/record
// (github.com/fanout-go/fanout/k8s/record, a drop-in replacement for
// client-go's tools/record) against k8s.io/client-go/tools/record, in the
// same run. Each measurement builds a broadcaster with one no-op sink that
// counts its calls and one recorder, and records [Config].RecordEvents
// events about [RecordPods] pods, all with the same type, reason and
// message, so that all but the first event of each pod are repeats, written
// with a Patch, from each number of goroutines of [Config].RecordProducers
// (1 and 8): goroutine j records about its own pods (i mod P = j) in turn,
// so the calls about each pod do not depend on the interleaving. Both get
// CorrelatorOptions{BurstSize: 1<<30}, so the spam filter never skips an
// event. Events are recorded in rounds of at most [RecordBatch] in all,
// within the 1000-event queue of both, so neither drops; after each round
// the harness spins, yielding with runtime.Gosched, until the sink has
// counted every call. The clock runs from the first event recorded until
// the sink has seen the last; allocations are counted over the second half
// of the events. A warm-up of each recorder is discarded, then the two are
// interleaved as above, and the run fails unless every measurement made
// exactly the same Create, Patch and Update calls, one per event, and the
// same about each pod.
//
// A second comparison, kind "events", does the same for events.k8s.io/v1:
// fanout's k8s/events against k8s.io/client-go/tools/events, with the
// same events, pods, producers and rounds, all with the same type, reason,
// action and note, so that each pod's first event is a Create, its second
// a Patch (a series of 2) and the rest are merged into the series with no
// sink call. A probe watcher counts the events each broadcaster hands out;
// after each round the harness waits until it has them all (and, for
// fanout, until Flush returns). The clock runs until every event is
// handled: fanout's Flush, or client-go's Shutdown followed by every
// goroutine of the measurement gone (up to client-go v0.37 each event
// runs on goroutines of its own). The most goroutines seen above the
// baseline while recording are reported, and every measurement must make
// the same calls about each pod. See [measureEvents].
//
// # Working readers
//
// Kind "working" is the throughput measurement with readers that do a
// small, fixed amount of work per value, the same in every system: each
// checks that its values arrive in order (see [KindWorking] and
// [WorkingSystems]), with each system at its default settings.
//
// # Targets
//
// [Run] measures, [WriteReport], [WriteJSON] and [WriteChart] render, and
// [EvaluateTargets] checks the project's performance targets. The targets
// that ratio two systems' scheduling on the shared machine are judged on
// the median of [Config].SchedulerRuns runs ([schedulerBound],
// [rerunSteps]).
package harness
