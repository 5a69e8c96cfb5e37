// Package fanoutnats carries a [fanout.Broadcaster] across processes and
// machines over NATS: a [Forwarder] publishes a broadcaster's values to
// NATS, a [Subscriber] (core NATS) or a [Consumer] (JetStream) publishes
// the values of a subscription into a local broadcaster, and a [Sink]
// writes a [fanout.Recorder]'s values to a JetStream stream.
package fanoutnats
