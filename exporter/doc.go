// Package exporter is a Kubernetes event exporter built on fanout: it
// watches Events, turns them into occurrences, routes them through a
// kubernetes-event-exporter-style route tree and fans them out to sinks
// (stdout, JSON Lines files and pipes, webhooks with Slack and Teams
// presets, Elasticsearch and OpenSearch, Kafka, Loki, OTLP, NATS
// JetStream, slog, syslog, Opsgenie, Pub/Sub, BigQuery, SQS, SNS, Kinesis,
// Firehose, EventBridge, OpsCenter, in memory), each with its own queue,
// full-queue strategy, retry policy and writers. The command
// cmd/fanout-eventer is a thin main over [Main].
//
//	cfg, _ := exporter.LoadConfig("example.yaml")
//	err := exporter.Run(ctx, exporter.Options{Config: cfg, Client: clientset, Listener: l})
//
// # Occurrences
//
// An occurrence is an event seen for the first time, or a modification that
// raised its count: core/v1 count, or for events.k8s.io series the series
// count (series are written only every 30 minutes and when they end, so
// the counts in between are never visible). It is identified by the
// event's UID and that count ([Occurrence.Key]). Modifications that do not
// raise the count, and deletions, are not occurrences. A start with a
// checkpoint resumes from it: the checkpoint decides what was missed; a
// start without one does not export the events last seen longer than
// maxEventAgeSeconds before it, as kubernetes-event-exporter
// ([Config.MaxEventAge]), nor does the restart of a first start stopped
// during its list, of the events that start had not reached.
//
// # Records and kubernetes-event-exporter configurations
//
// Payload sinks write by default an [EnhancedEvent], the record
// kubernetes-event-exporter writes, with the occurrence's identity in a
// "fanout" object; a receiver's format fanout writes the [Occurrence]
// instead, and a layout (Go templates with the sprig functions) reshapes
// the record as in kubernetes-event-exporter. A kubernetes-event-exporter
// configuration loads as it is: each of its keys is mapped, or accepted
// with a warning that names its line ([Config].Warnings), and every one
// of its receiver kinds has a sink here. With compat
// kubernetes-event-exporter ([CompatKEE], top level or per receiver) a
// receiver gets exactly kubernetes-event-exporter v1.6.1's stream: its
// records without the fanout object, one per event at first sighting,
// once per matching rule that names the receiver, and its
// Elasticsearch, Loki and Kafka specifics; the route then matches
// component, host and minCount as it does.
//
// # Delivery guarantees
//
//   - Every sink receives the occurrences routed to it once each, as long
//     as the process runs, in the source's order per involved object (in
//     one order with one writer, [Receiver].Writers): a failed write is
//     retried ([Retry]) and never reordered; a write stores a prefix of its
//     batch and the rest is retried.
//   - A sink whose queue strategy is Wait is lossless: when its queue is
//     full, the source waits (and so does every other sink's feed). The
//     other strategies never slow the source; what they discard is counted
//     (fanout_eventer_sink_dropped_total{reason="queue_oldest"|
//     "queue_full"|"queue_timeout"}). These queue drops count every
//     occurrence the sink's queue missed, including ones not routed to it,
//     since all sinks share one broadcaster.
//   - Each sink runs on the core's runner ([fanout.StartBatchSink]) with
//     the core's retry policy ([Retry.Policy]) and drop reasons
//     ([fanout.DropReason]); the metric keeps the exporter's label values
//     ([DropLabel]).
//   - An occurrence a sink fails to store is counted by reason: rejected
//     (a [Permanent] error, such as a 4xx answer or an oversized NATS
//     message), retries_exhausted, panic (the sink panicked: only that
//     occurrence is dropped and the sink goes on), shutdown.
//   - The checkpoint covers a prefix of the occurrences: those every sink
//     has finished with (stored or dropped). A Wait sink holds it back
//     until it has stored them; a lossy sink holds it back by at most its
//     queue length plus what its runner holds (one batch, or with several
//     writers up to the queue length again). Several writers finish in
//     any order: the checkpoint passes an occurrence only once it and
//     every earlier one are done. After a restart, the exporter resumes
//     the watch from the checkpoint's resource version, so every change
//     made while it was down comes in order and no count raise collapses;
//     it forwards exactly the occurrences the checkpoint does not cover (a
//     new UID, or a count above the one checkpointed). It lists only when
//     the API server no longer has that resource version (410 Gone), and
//     then counts the raises that collapsed
//     (fanout_eventer_source_collapsed_raises_total).
//   - A graceful stop (SIGTERM) flushes the queues within shutdownTimeout
//     and writes the last checkpoint, so a restart repeats nothing (a sink
//     whose write has not returned a second after the deadline, blocked
//     on a stalled pipe, is abandoned: the checkpoint covers only what it
//     wrote, and the process exits). After a
//     crash, what was stored after the last checkpoint may be forwarded
//     again: the file sink reads back what it wrote after the checkpoint
//     ([Marker]) and skips it, the NATS sink's message ID (UID/count) makes
//     JetStream store it once, the webhook carries the key as
//     Idempotency-Key, Elasticsearch documents and Loki entries written
//     again replace or equal the first, and Kafka records and OTLP log
//     records carry the key for consumers; stdout and log sinks may
//     repeat it.
//
// # Configuration
//
// The repository's configuration convention (see "Configuration" in the
// core's package doc): the YAML configuration and [Config] fields left out
// take the documented defaults (a receiver's retry, [DefaultRetry]; its
// queue, Wait with 1000 places, a webhook's DropOldest with 10,000; a
// YAML key set to 0 counts as left out, but retry.maxTries, where 0
// means retrying until shutdown), and a value no setting can mean is an
// error from [LoadConfig] and validation, naming the key, never
// silently changed. Each receiver's [Retry] becomes the core's
// [fanout.RetryPolicy] ([Retry.Policy]).
//
// # Goroutines
//
// [Run] owns everything it starts and returns only after all of it has
// ended:
//
//   - the source: one goroutine that lists (when it must) and watches,
//     and publishes into the broadcaster; ended by Run's context;
//   - one goroutine per sink, reading its watcher in batches and writing,
//     and with several writers up to that many more, started as the
//     objects waiting for one need them; they end once the broadcaster
//     has shut down and the queue is drained, or when the shutdown
//     deadline passes (then the writes in progress are cancelled);
//   - the checkpoint goroutine, which writes at most once per interval;
//     ended by [Pipeline.Shutdown] after the sinks, which then writes the
//     last checkpoint;
//   - the HTTP server, if a listener is given, and with leader election
//     client-go's elector (the Lease is released only after the flush).
//
// Goroutines are bounded by sinks and their writers, never by events, and
// memory by the queue lengths (plus client-go's cache of the live events,
// bounded by the API server's retention).
//
// # Adding a sink
//
// Implement [Sink] (Write and Close) and set it as a [Receiver]'s Sink; a
// sink that can tell what it stored after a position implements [Marker]
// too, and then repeats nothing even after a crash.
package exporter
