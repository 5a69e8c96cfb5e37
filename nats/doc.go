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
//     (a delivery lost during a reconnect) and skipping redeliveries of
//     stream sequences it already delivered (acks lost). So every watcher of
//     every process consuming the same stream (with the same filter)
//     receives the same values in the same order.
//   - A Forwarder in JetStream mode stores one publisher's values in its
//     order unless a publish had to be retried (time-out, reconnect, full
//     stream): the retried value is then stored after the values sent with
//     it. With Batch 1 the order holds through retries, at one round trip
//     per value.
//
// # Delivery guarantees
//
//   - Core NATS is at most once. What the server could not deliver is
//     invisible to both sides, including a value published where nobody
//     listens (counted as published: NATS cannot tell); what the NATS
//     client dropped because a Subscriber's buffer was full is counted
//     ([InboundStats].SlowConsumerDropped).
//   - JetStream with a durable Consumer is at least once: a value is
//     acknowledged only once the local broadcaster has accepted it, so with
//     a lossless local watcher ([fanout.WaitIfChannelFull]), a value is
//     lost neither when the server restarts nor when the consuming process
//     crashes; after a crash, the values after the ack floor are delivered
//     again, in order, to the durable's next consumer (see [Consume]).
//     With a Forwarder in JetStream mode whose watcher waits when full, the
//     producing side loses nothing either: values are retried until the
//     stream acknowledges them, and the message IDs make the stream store
//     a retried value once.
//   - Nothing is lost silently: every value that is not carried is counted
//     ([ForwarderStats], [InboundStats], [SinkStats]) and reported to the
//     OnError callback and the logger, except what a local watcher's
//     strategy drops, which the core counts ([fanout.WatcherStats], also in
//     ForwarderStats.Watcher) and reports to [fanout.WithDropHandler].
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
// A [Subscriber] owns one goroutine, and the NATS client delivers into its
// buffer. [Subscriber.Close] unsubscribes at once and blocks until the
// buffered messages are delivered, or until its context ends. A [Consumer]
// owns one goroutine, plus the NATS client's pull-consumer goroutines;
// [Consumer.Close] stops pulling at once and blocks likewise. Both also end
// by themselves when the broadcaster shuts down or the connection closes.
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
// Sink). A panic in any of them is contained: the value concerned is
// counted as failed (or not decoded), a panicking callback is counted in
// CallbackPanics, and the bridge goes on.
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
