package fanoutnats

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/fanout-go/fanout"
)

// inbound is what a [Subscriber] and a [Consumer] share: it decodes
// messages and publishes the values into the local broadcaster, and keeps
// the counters.
type inbound[T any] struct {
	b     *fanout.Broadcaster[T]
	codec Codec[T]
	rep   reporter

	ctx    context.Context // cancelled when Close gives up
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error

	received, delivered, decodeErrs, failed, abandoned atomic.Uint64
	duplicates, resets, bytes                          atomic.Uint64
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
	accepted    outcome = iota // the broadcaster accepted the value
	undecodable                // the payload did not decode: counted and reported
	refused                    // the broadcaster did not accept it: stop
)

// deliver decodes a payload and publishes the value into the broadcaster,
// waiting as the local watchers' behaviours say, until Close gives up.
func (in *inbound[T]) deliver(subject string, seq uint64, data []byte) outcome {
	in.received.Add(1)
	in.bytes.Add(uint64(len(data)))
	v, err := in.codec.decode(data)
	if err != nil {
		in.decodeErrs.Add(1)
		in.rep.report(&Error{Op: "decode", Subject: subject, Sequence: seq, Err: err})
		return undecodable
	}
	if err := in.b.ActionContext(in.ctx, v); err != nil {
		if in.ctx.Err() != nil {
			in.abandoned.Add(1)
		} else {
			in.failed.Add(1)
			in.rep.report(&Error{Op: "deliver", Subject: subject, Sequence: seq, Err: err})
			in.setErr(err)
		}
		return refused
	}
	in.delivered.Add(1)
	return accepted
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
	if ctx == nil {
		ctx = context.Background()
	}
	stop()
	select {
	case <-in.done:
		return nil
	case <-ctx.Done():
	}
	in.cancel()
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
		Bytes:          in.bytes.Load(),
		CallbackPanics: in.rep.panics.Load(),
	}
}

// isClosing reports whether err ends the loop because Close asked for it.
func isClosing(err error) bool {
	return errors.Is(err, context.Canceled)
}

// InboundStats is a snapshot of the counters of a [Subscriber] or a
// [Consumer]. Every message taken from NATS (Received) ends as exactly one
// of Delivered, DecodeErrors, Failed, Abandoned or Duplicates, or is being
// delivered.
type InboundStats struct {
	// Received counts messages taken from NATS.
	Received uint64
	// Delivered counts values the local broadcaster accepted.
	Delivered uint64
	// DecodeErrors counts messages whose payload did not decode. JetStream
	// consumers terminate them (Term), so that they are not redelivered.
	DecodeErrors uint64
	// Failed counts decoded values the broadcaster refused because it was
	// shut down. A JetStream consumer leaves them unacknowledged.
	Failed uint64
	// Abandoned counts messages given up because Close's context ended.
	// A durable JetStream consumer leaves them unacknowledged, so that they
	// are redelivered to the next consumer of the durable.
	Abandoned uint64
	// Duplicates counts redeliveries of values already delivered (a durable
	// consumer's ack was lost): acknowledged again and skipped.
	Duplicates uint64
	// Resets counts the times a durable consumer was reset to its ack
	// floor to repair a gap in deliveries, so that no value is skipped.
	Resets uint64
	// SlowConsumerDropped counts messages the NATS client dropped because
	// the subscriber's buffer was full (core NATS only).
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
// fanoutnats_inbound_messages_total{result=received|delivered|decode_error|failed|abandoned|duplicate|slow_consumer_dropped},
// fanoutnats_inbound_resets_total, _bytes_total, _callback_panics_total
// and the gauge fanoutnats_inbound_pending.
func (s InboundStats) Metrics() []Metric {
	const msgs = "fanoutnats_inbound_messages_total"
	const help = "Messages taken from NATS, by outcome, and messages the NATS client dropped."
	return []Metric{
		counter(msgs, help, s.Received, Label{"result", "received"}),
		counter(msgs, help, s.Delivered, Label{"result", "delivered"}),
		counter(msgs, help, s.DecodeErrors, Label{"result", "decode_error"}),
		counter(msgs, help, s.Failed, Label{"result", "failed"}),
		counter(msgs, help, s.Abandoned, Label{"result", "abandoned"}),
		counter(msgs, help, s.Duplicates, Label{"result", "duplicate"}),
		counter(msgs, help, s.SlowConsumerDropped, Label{"result", "slow_consumer_dropped"}),
		counter("fanoutnats_inbound_resets_total", "Durable consumer resets after a gap in deliveries.", s.Resets),
		counter("fanoutnats_inbound_bytes_total", "Payload bytes received.", s.Bytes),
		counter("fanoutnats_inbound_callback_panics_total", "Panics of OnError or the logger, contained.", s.CallbackPanics),
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
