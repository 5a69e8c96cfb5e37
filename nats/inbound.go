package fanoutnats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/fanout-go/fanout"
	"github.com/nats-io/nats.go"
)

// inbound is what a [Subscriber] and a [Consumer] share: it decodes
// messages and publishes the values into the local broadcaster, and keeps
// the counters. Its methods run on the bridge's goroutine, except stats.
type inbound[T any] struct {
	b     *fanout.Broadcaster[T]
	codec Codec[T]
	rep   reporter

	ctx    context.Context // cancelled when Close gives up
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error

	// Owned by the goroutine: the parts and values of a frame.
	parts [][]byte
	vals  []T

	received, delivered, decodeErrs, failed, abandoned atomic.Uint64
	duplicates, resets, bytes, frames, reconnects      atomic.Uint64
}

func (in *inbound[T]) init(b *fanout.Broadcaster[T], codec Codec[T], onError func(error), logger *slog.Logger) {
	in.b, in.codec = b, codec
	in.rep.onError, in.rep.logger = onError, logger
	in.ctx, in.cancel = context.WithCancel(context.Background())
	in.done = make(chan struct{})
}

// outcome is what became of one message.
type outcome uint8

const (
	accepted    outcome = iota // the broadcaster accepted its values (some may not have decoded)
	undecodable                // no value decoded: counted and reported
	refused                    // the broadcaster did not accept them all: stop
)

// deliver decodes a message (a plain message or a frame) and publishes its
// values into the broadcaster, waiting as the local watchers' behaviours
// say, until Close gives up. When accepted, it also returns the sequence
// number in the broadcaster after its last value: the [fanout.Broadcaster.Taken]
// at which every lossless watcher has taken them.
func (in *inbound[T]) deliver(subject string, seq uint64, h nats.Header, data []byte) (outcome, uint64) {
	in.bytes.Add(uint64(len(data)))
	if count, ok := frameCount(h); ok {
		return in.deliverFrame(subject, seq, count, data)
	}
	in.received.Add(1)
	v, err := in.codec.decode(data)
	if err != nil {
		in.undecodable(subject, seq, err)
		return undecodable, 0
	}
	local, err := in.b.ActionSeq(in.ctx, v)
	if err != nil {
		in.refused(subject, seq, err, 1)
		return refused, 0
	}
	in.delivered.Add(1)
	return accepted, local + 1
}

// receivedNotDelivered counts a message taken from NATS that is not delivered (a
// redelivery a durable skips, a message left in a subscriber's buffer at
// its stop) as deliver would count it, payload bytes and frame included,
// and returns the values it counts: those of a frame, one for a frame that
// does not parse or a plain message. The caller counts where they went.
func (in *inbound[T]) receivedNotDelivered(h nats.Header, data []byte) uint64 {
	in.bytes.Add(uint64(len(data)))
	n := uint64(1)
	if count, ok := frameCount(h); ok {
		in.frames.Add(1)
		if parts, err := splitFrame(count, data, nil); err == nil {
			n = uint64(len(parts))
		}
	}
	in.received.Add(n)
	return n
}

// deliverFrame publishes the values of a frame in one batch. A value that
// does not decode is counted and reported, and the others are delivered; a
// frame that does not parse counts as one value that did not decode.
func (in *inbound[T]) deliverFrame(subject string, seq uint64, count string, data []byte) (outcome, uint64) {
	in.frames.Add(1)
	parts, err := splitFrame(count, data, in.parts[:0])
	in.parts = parts
	if err != nil {
		in.received.Add(1)
		in.undecodable(subject, seq, err)
		return undecodable, 0
	}
	in.received.Add(uint64(len(parts)))
	vals := in.vals[:0]
	for i, p := range parts {
		v, err := in.codec.decode(p)
		if err != nil {
			in.undecodable(subject, seq, fmt.Errorf("value %d of %d of a frame: %w", i+1, len(parts), err))
			continue
		}
		vals = append(vals, v)
	}
	clear(parts)
	in.vals = vals[:0]
	defer clear(vals) // the broadcaster holds the values; this buffer must not
	if len(vals) == 0 {
		return undecodable, 0
	}
	first, n, err := in.b.ActionBatchSeq(in.ctx, vals)
	in.delivered.Add(uint64(n))
	if n < len(vals) {
		in.refused(subject, seq, err, len(vals)-n)
		return refused, 0
	}
	return accepted, first + uint64(n)
}

func (in *inbound[T]) undecodable(subject string, seq uint64, err error) {
	in.decodeErrs.Add(1)
	in.rep.report(&Error{Op: "decode", Subject: subject, Sequence: seq, Err: err})
}

// refused counts n values the broadcaster did not accept: abandoned when
// Close gave up, failed when it shut down.
func (in *inbound[T]) refused(subject string, seq uint64, err error, n int) {
	if in.ctx.Err() != nil {
		in.abandoned.Add(uint64(n))
		return
	}
	in.failed.Add(uint64(n))
	in.rep.report(&Error{Op: "deliver", Subject: subject, Sequence: seq, Err: err})
	in.setErr(err)
}

func (in *inbound[T]) setErr(err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.err == nil {
		in.err = err
	}
}

func (in *inbound[T]) getErr() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.err
}

// close runs stop (which makes the goroutine finish what it holds and
// exit) and waits for the goroutine, or for ctx, when it makes the
// goroutine give up.
func (in *inbound[T]) close(ctx context.Context, stop func()) error {
	return closeWait(ctx, stop, in.done, in.cancel)
}

// closeWait is the Close of a forwarder, subscriber or consumer: it calls
// stop, waits until done is closed and returns nil, or, if ctx ends
// first, calls giveUp and returns ctx.Err(). A nil ctx is an error:
// nothing is stopped.
func closeWait(ctx context.Context, stop func(), done <-chan struct{}, giveUp func()) error {
	if ctx == nil {
		return errNilContext
	}
	stop()
	select {
	case <-done: // finished, even if ctx has ended too: nothing was given up
		return nil
	default:
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	giveUp()
	return ctx.Err()
}

func (in *inbound[T]) stats() InboundStats {
	return InboundStats{
		Received:       in.received.Load(),
		Delivered:      in.delivered.Load(),
		DecodeErrors:   in.decodeErrs.Load(),
		Failed:         in.failed.Load(),
		Abandoned:      in.abandoned.Load(),
		Duplicates:     in.duplicates.Load(),
		Resets:         in.resets.Load(),
		Frames:         in.frames.Load(),
		Reconnects:     in.reconnects.Load(),
		Bytes:          in.bytes.Load(),
		CallbackPanics: in.rep.panics.Load(),
	}
}

// isClosing reports whether err ends the loop because Close asked for it.
func isClosing(err error) bool {
	return errors.Is(err, context.Canceled)
}

// InboundStats is a snapshot of the counters of a [Subscriber] or a
// [Consumer]. Every value taken from NATS (Received; a frame counts as the
// values it carries) ends as exactly one of Delivered, DecodeErrors,
// Failed, Abandoned or Duplicates, or is being delivered.
type InboundStats struct {
	// Received counts values taken from NATS: one per plain message, the
	// values of a frame (see [FrameHeader]), one for a frame that does not
	// parse.
	Received uint64
	// Delivered counts values the local broadcaster accepted.
	Delivered uint64
	// DecodeErrors counts values whose payload did not decode, and frames
	// that did not parse. A durable JetStream consumer acknowledges them
	// with the values around them, so that they are not redelivered.
	DecodeErrors uint64
	// Failed counts decoded values the broadcaster refused because it was
	// shut down. A JetStream consumer leaves them unacknowledged.
	Failed uint64
	// Abandoned counts values given up because Close's context ended.
	// A durable JetStream consumer leaves them unacknowledged, so that they
	// are redelivered to the next consumer of the durable.
	Abandoned uint64
	// Duplicates counts redelivered values a durable consumer had already
	// delivered (an acknowledgement was lost or came late, or the consumer
	// was reset): skipped.
	Duplicates uint64
	// Resets counts the times a durable consumer was reset to its ack
	// floor to repair a gap in deliveries, so that no value is skipped.
	Resets uint64
	// Frames counts the frames received (messages carrying several values).
	Frames uint64
	// Acks counts the acknowledgements a durable consumer sent, each of
	// every message up to a stream sequence (AckAll), double acks included.
	Acks uint64
	// AcksConfirmed counts the times the server confirmed a durable
	// consumer's ack floor: at Close, and after each reconnect.
	AcksConfirmed uint64
	// AcksUnconfirmed counts the confirmations that failed (each is
	// reported, wrapping [ErrAckUnconfirmed]): the values up to the ack
	// floor the server holds may then be redelivered to the durable's next
	// consumer.
	AcksUnconfirmed uint64
	// AckFloor is the highest stream sequence a durable consumer
	// acknowledged: every message up to it was taken by the local lossless
	// watchers.
	AckFloor uint64
	// Reconnects counts the connection's reconnects while a Subscriber or a
	// durable Consumer ran (an ordered Consumer does not count them: the
	// NATS client recreates it).
	Reconnects uint64
	// SlowConsumerDropped counts messages the NATS client dropped because
	// the subscriber's buffer was full (core NATS only): messages, not
	// values, since the client drops frames unread. The client keeps the
	// count with the subscription: the subscriber reads it after each
	// message, at Stats, and before it unsubscribes. When the connection is
	// closed, the client forgets it first: the drops since the subscriber
	// last read it are then not counted.
	SlowConsumerDropped uint64
	// Bytes counts the payload bytes received.
	Bytes uint64
	// Pending is the number of messages waiting in the subscriber's buffer
	// (core NATS only).
	Pending int
	// CallbackPanics counts panics of OnError and the logger, contained.
	CallbackPanics uint64
}

// Metrics returns the statistics as Prometheus samples:
// fanoutnats_inbound_values_total{result=received|delivered|decode_error|failed|abandoned|duplicate},
// fanoutnats_inbound_acks_total{result=sent|confirmed|unconfirmed},
// fanoutnats_inbound_slow_consumer_dropped_total (messages),
// fanoutnats_inbound_resets_total, _frames_total, _reconnects_total,
// _bytes_total, _callback_panics_total, and the gauges
// fanoutnats_inbound_ack_floor and fanoutnats_inbound_pending.
func (s InboundStats) Metrics() []fanout.Metric {
	const values = "fanoutnats_inbound_values_total"
	const help = "Values taken from NATS (a frame counts its values), by outcome."
	const acks, aHelp = "fanoutnats_inbound_acks_total", "Acknowledgements of a durable consumer, and confirmations of its ack floor."
	return []fanout.Metric{
		counter(values, help, s.Received, label("result", "received")),
		counter(values, help, s.Delivered, label("result", "delivered")),
		counter(values, help, s.DecodeErrors, label("result", "decode_error")),
		counter(values, help, s.Failed, label("result", "failed")),
		counter(values, help, s.Abandoned, label("result", "abandoned")),
		counter(values, help, s.Duplicates, label("result", "duplicate")),
		counter(acks, aHelp, s.Acks, label("result", "sent")),
		counter(acks, aHelp, s.AcksConfirmed, label("result", "confirmed")),
		counter(acks, aHelp, s.AcksUnconfirmed, label("result", "unconfirmed")),
		counter("fanoutnats_inbound_slow_consumer_dropped_total", "Messages the NATS client dropped: the subscriber's buffer was full.", s.SlowConsumerDropped),
		counter("fanoutnats_inbound_resets_total", "Durable consumer resets after a gap in deliveries.", s.Resets),
		counter("fanoutnats_inbound_frames_total", "Frames (messages of several values) received.", s.Frames),
		counter("fanoutnats_inbound_reconnects_total", "Reconnects of the connection while the bridge ran.", s.Reconnects),
		counter("fanoutnats_inbound_bytes_total", "Payload bytes received.", s.Bytes),
		counter("fanoutnats_inbound_callback_panics_total", "Panics of OnError or the logger, contained.", s.CallbackPanics),
		gauge("fanoutnats_inbound_ack_floor", "The highest stream sequence a durable consumer acknowledged.", float64(s.AckFloor)),
		gauge("fanoutnats_inbound_pending", "Messages waiting in the subscriber's buffer.", float64(s.Pending)),
	}
}

// chanOnce runs a function and then closes a channel, once.
type chanOnce struct{ once sync.Once }

func (c *chanOnce) do(ch chan struct{}, f func()) {
	c.once.Do(func() {
		f()
		close(ch)
	})
}
