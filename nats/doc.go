// Package fanoutnats carries a [fanout.Broadcaster] across processes and
// machines over NATS (import path github.com/fanout-go/fanout/nats):
//
//   - a [Forwarder] publishes the values of a broadcaster to NATS, as an
//     ordinary watcher with its own queue and full-queue strategy;
//   - a [Subscriber] (core NATS) or a [Consumer] (a JetStream stream)
//     publishes the values it receives into a local broadcaster, so that
//     one network subscription serves any number of local watchers;
//   - a [Sink] writes the values of a [fanout.Recorder] to a JetStream
//     stream, with a message ID per value so that retries are stored once.
//
// Values are encoded by a [Codec] (JSON by default). Core NATS gives
// at-most-once fan-out; JetStream adds persistence, replay ([Start]) and
// at-least-once delivery.
//
//	// process A
//	fwd, _ := fanoutnats.Forward(events, nc, fanoutnats.ForwardConfig[Event]{Subject: "events"})
//	// process B, C, ...
//	sub, _ := fanoutnats.Subscribe(nc, local, fanoutnats.SubscribeConfig[Event]{Subject: "events"})
//	w, _ := local.Watch(fanout.WithFullChannelBehavior(fanout.DropOldestIfChannelFull))
//
// # Ordering guarantees
//
//   - A Forwarder publishes the values its watcher receives, which come in
//     the broadcaster's order, one at a time from one goroutine: in that
//     order.
//   - Core NATS keeps the order of one publisher's messages to each
//     subscriber. A Subscriber publishes messages into its broadcaster in
//     the order it receives them, and the broadcaster keeps its order for
//     every watcher. So every local watcher of every process receives the
//     values of one Forwarder in that Forwarder's order. Values of
//     different publishers may interleave differently in different
//     processes.
//   - A JetStream stream is one total order, its sequence. Both kinds of
//     Consumer deliver in the stream's order without gap or duplicate while
//     they run: the ordered consumer by the NATS client's own gap detection
//     (it recreates the server-side consumer after the last sequence
//     delivered); the durable consumer by checking that consumer sequences
//     are consecutive, resetting the consumer to its ack floor after a gap
//     and after every reconnect (deliveries lost with the connection), and
//     skipping redeliveries of stream sequences it already delivered. So
//     every watcher of every process consuming the same stream (with the
//     same filter) receives the same values in the same order.
//   - A Forwarder in JetStream mode stores one publisher's values in its
//     order unless a publish had to be retried (time-out, reconnect, full
//     stream): the retried value is then stored after the values sent with
//     it. With Batch 1 the order holds through retries, at one round trip
//     per value.
//   - Frames ([ForwardConfig].Frame) change none of this: a frame holds
//     consecutive values of one publisher for one subject, in order, and
//     is one message; a receiver publishes it into its broadcaster as one
//     contiguous batch.
//
// # Delivery guarantees
//
//   - Core NATS is at most once. What the server could not deliver is
//     invisible to both sides, including a value published where nobody
//     listens (counted as published: NATS cannot tell). A Forwarder
//     counts a value as published once the client accepted it: if the
//     flush of its batch then fails (counted in
//     [ForwarderStats].FlushErrors and reported), the client may still
//     send it, or lose it with the connection. What the NATS client
//     dropped because a Subscriber's buffer was full is counted
//     ([InboundStats].SlowConsumerDropped).
//   - JetStream with a durable Consumer is at least once: a message is
//     acknowledged only once every lossless local watcher has taken its
//     values (see "Acknowledgement" below), so a value such a watcher has
//     not taken is lost neither when the server restarts nor when the
//     consuming process crashes: the durable's next consumer gets it
//     again, in order. With a Forwarder in JetStream mode whose watcher
//     waits when full, the producing side loses nothing either: values are
//     retried until the stream acknowledges them, and the message IDs make
//     the stream store a retried value (or frame) once.
//   - JetStream with an ordered Consumer acknowledges nothing: it is a
//     replay of the stream from where its Start says, for as long as it
//     runs, and a new one starts where its own Start says.
//   - Nothing is lost silently: every value that is not carried is counted
//     ([ForwarderStats], [InboundStats], [SinkStats]) and reported to the
//     OnError callback and the logger, except what a local watcher's
//     strategy drops, which the core counts ([fanout.WatcherStats], also in
//     ForwarderStats.Watcher) and reports to [fanout.WithDropHandler].
//     One exception: an ordered Consumer cannot tell a stream deleted and
//     created again under its name from the old one (the NATS client
//     resumes it after the last sequence it delivered, and the new
//     stream's messages up to that sequence are not delivered, counted
//     nowhere). A durable Consumer stops with an error then. Start a new
//     ordered Consumer after recreating its stream. And the stream's own
//     limits: a stream that discards old messages (DiscardOld with
//     MaxMsgs, MaxBytes or MaxAge) can discard messages a consumer has not
//     read yet; the server decides that, and no counter here shows it. Use
//     DiscardNew, which the Forwarder retries, where nothing may be lost.
//
// # Acknowledgement
//
// A durable [Consumer] (ConsumeConfig.Durable) acknowledges stream
// sequence s once every [fanout.WaitIfChannelFull] watcher of the local
// broadcaster that was registered when the values of s were accepted has
// taken them, or has left (Stop, eviction): [fanout.Broadcaster.Taken].
// Watchers of the lossy behaviours never hold acknowledgements back. What
// "taken" means, so what is safe when the consuming process crashes:
//
//	watcher reads with                 a value is taken (and may be acknowledged) when
//	---------------------------------  --------------------------------------------------
//	Recv, Next, All                    the call returned it to the watcher's code
//	ResultChan                         the watcher's code received it from the channel
//	either, registered WithCommit      the watcher's code called Commit after that
//
// So after a crash, the durable's next consumer begins after the last
// acknowledgement, and gets again every value some lossless watcher had
// not taken, at least once: also values taken by the other watchers, and
// those taken since the last acknowledgement. Without [fanout.WithCommit],
// a value a watcher had received but not finished with (written
// somewhere, say) when the process died is not delivered again: for that,
// register the watcher WithCommit and call [fanout.Watcher.Commit] once
// the values received so far are done with; the cost is one Commit per
// batch (a lock of the watcher), and acknowledgements that wait for the
// slowest watcher's work.
//
// Acknowledgements are batched: the consumer acknowledges with AckAll
// (one acknowledgement covers every message up to its sequence; the
// durables Consume creates use that policy, and an existing durable that
// does not is refused), from a goroutine of its own that polls Taken every millisecond
// while values are pending (up to every 32 ms while no watcher reads), and
// sooner every 64 messages. They are sent without waiting for the server,
// except when a confirmation matters: after every reconnect and at Close,
// the last one is sent again as a double ack and the server's ack floor is
// read back. A confirmation that fails is counted
// ([InboundStats].AcksUnconfirmed), reported (an [*Error] wrapping
// [ErrAckUnconfirmed]), retried after a reconnect, and returned by Close.
// So after Close returned nil, the durable's next consumer redelivers
// nothing. Within one Consumer, a value is never delivered twice: redeliveries
// (an acknowledgement the server lost, the consumer's own resets, a
// watcher slower than AckWait) are skipped ([InboundStats].Duplicates).
//
// A message whose payload does not decode is acknowledged with the values
// around it. AckWait still applies: values held by lossless watchers for
// longer are redelivered by the server and skipped, costing network
// traffic only; MaxAckPending bounds what the consumer may hold,
// delivered and not yet taken, so a slow watcher holds back the stream's
// deliveries as it holds back any publisher.
//
// # Frames
//
// With [ForwardConfig].Frame, a Forwarder packs up to that many values of
// one batch, consecutive and for the same subject, into one NATS message
// with the header [FrameHeader], so that one subscription receives values
// at a multiple of the NATS message rate. A frame is made of what the
// forwarder's watcher holds when it takes a batch, never waited for: a
// value alone is sent as a plain message, so framing adds no latency. In
// JetStream a frame is one stream message: one sequence, one message ID
// (MsgID of its first value and its size, none if MsgID gives one of its
// values none, or the forwarder's own), and one acknowledgement, once its
// last value is taken. Frames are sized by the server's maximum payload: a
// frame a stream refuses as too large (its MaxMsgSize) is split in halves
// until the parts fit, and only a value too large alone fails. [Subscribe]
// and [Consume] read frames and plain messages alike; a value of a frame
// that does not decode is counted and the others are delivered; a frame
// that does not parse counts as one value that did not decode. Every
// receiver must understand frames: turn them on once every process runs a
// version that does.
//
// # Configuration
//
// The repository's configuration convention (see "Configuration" in the
// core's package doc): each constructor takes a Config struct whose zero
// fields take the defaults ([DefaultBatch], [DefaultTimeout],
// [DefaultRetryWait], [DefaultBuffer]) and returns an error, naming the
// field, for a value no setting can mean, such as a negative batch,
// buffer or duration, or a batch or buffer above [MaxBatch] or [MaxBuffer]
// (the core's [fanout.MaxQueueLength]); nothing is normalised silently. The [Forwarder]'s
// JetStream retries are a [fanout.RetryPolicy] (RetryWait apart, until
// acknowledged), and a [Sink] runs on a [fanout.Recorder]'s runner with
// [RetryPolicy].
//
// # Goroutines
//
// A [Forwarder] owns one goroutine, which reads its watcher, publishes and
// flushes. In JetStream mode the NATS client adds its own, for the acks.
// [Forwarder.Close] stops it: it unregisters the watcher at once and blocks
// until what the watcher held is published, or until its context ends,
// when it gives up the rest without waiting further. The goroutine also
// ends by itself when the broadcaster shuts down (after forwarding every
// value accepted before), when the watcher is evicted, or when the
// connection is closed (noticed when a value comes, which then fails with
// the values still queued, and the watcher is unregistered so that no
// producer waits for it).
//
// A [Subscriber] owns two goroutines, one that delivers and one that only
// reads the connection's status events (reconnects and the close, which
// the client drops when they are not read at once), and the NATS client
// delivers into its buffer. [Subscriber.Close] unsubscribes at once and blocks until the
// buffered messages are delivered, or until its context ends. A [Consumer]
// owns one goroutine, plus the NATS client's pull-consumer goroutines, and
// a durable one a second goroutine that acknowledges; [Consumer.Close]
// stops pulling at once and blocks likewise, and for a durable until the
// lossless watchers have taken what was delivered and the ack floor is
// confirmed (or its context ends: then what was taken is acknowledged and
// the rest is redelivered to the durable's next consumer). Both also end
// by themselves when the broadcaster shuts down or the connection closes;
// a durable's acknowledging goroutine then still waits for the watchers
// to take what was delivered, until Close gives up.
// A [Sink] starts no goroutine: the recorder's runner calls it.
//
// Every Close is idempotent, bounded by its context (it never waits longer
// for a dead server), and leaves the connection open: connections belong
// to the caller. Done channels tell when a goroutine has exited; Err says
// why it stopped on its own.
//
// # Callbacks
//
// The OnError callbacks, loggers, codecs and subject and message-ID
// functions run on the bridge's goroutine (or the recorder's runner, for a
// Sink; a durable consumer's OnError and logger also on its acknowledger's,
// never two calls at once). A panic in any of them is contained: the value concerned is
// counted as failed (or not decoded), a panicking callback is counted in
// CallbackPanics, and the bridge goes on.
//
// # Metrics
//
// Each bridge ([Forwarder], [Subscriber], [Consumer], [Sink]) and each
// snapshot of its statistics ([ForwarderStats], [InboundStats],
// [SinkStats]) is a [fanout.MetricSource]: its Metrics method returns the
// counters as [fanout.Metric] samples named fanoutnats_*, the shape the
// core's [fanout.Broadcaster.Metrics] uses. This module does not depend on
// the Prometheus client; the module github.com/fanout-go/fanout/metrics
// makes a Prometheus collector of any source:
//
//	reg.MustRegister(metrics.NewCollector(fwd, prometheus.Labels{"bridge": "orders"}))
//
// # Permissions
//
// The server reports a permissions violation asynchronously, as the
// connection's last error, not as the result of the operation. [Subscribe]
// flushes after subscribing and returns an error wrapping
// [nats.ErrPermissionViolation] when the subscription was denied. A
// Forwarder in core mode reads it after each flush and counts the batch's
// values for the denied subject as failed; in JetStream mode, and in a
// Sink, the publish times out (the stream never sees the message) and the
// error is then reported as the permissions violation, which [Retryable]
// does not retry. Another error on the same connection between the
// operation and that check can hide it: the value is then reported with the
// time-out.
package fanoutnats
