package fanoutnats

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/internal/guard"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SinkConfig configures [NewSink]. Subject or SubjectOf is required.
type SinkConfig[T any] struct {
	// Subject is the subject every value is published to, unless SubjectOf
	// is set. A stream must capture it.
	Subject string
	// SubjectOf, if set, returns each value's subject.
	SubjectOf func(v T) string
	// Codec encodes the values; the zero Codec is JSON.
	Codec Codec[T]
	// MsgID returns a value's Nats-Msg-Id. The default is a hash of the
	// subject and the encoded value, so that every attempt at writing a
	// value carries the same ID, in any process, and the stream stores it
	// once within its Duplicates window (2 minutes by default). Identical
	// values written within the window are therefore stored once: give an
	// ID of your own (an event's unique ID) if they must all be stored.
	MsgID func(v T) string
	// Timeout bounds each write (an earlier deadline of the context the
	// recorder passes applies too). The default is [DefaultTimeout]. A
	// write the server denies fails when it expires: the server reports a
	// permissions violation asynchronously, and the sink reads it then.
	Timeout time.Duration
}

// Sink writes the values of a [fanout.Recorder] to a JetStream stream: pass
// it to [fanout.Recorder.StartSink], with [RetryPolicy] in
// [fanout.WithRetry]. Create and Update both publish the value (a stream is
// a log: a repeat is a new record) with a message ID, so that a retry of a
// write whose ack was lost is stored once. The value returned is the one
// given. A Sink starts no goroutines and is safe for concurrent use.
type Sink[T any] struct {
	js  jetstream.JetStream
	cfg SinkConfig[T]

	published, duplicates, failures atomic.Uint64
}

// NewSink returns a sink publishing to js as cfg says. It returns an error
// if js is nil, Timeout is negative or no valid subject is configured.
func NewSink[T any](js jetstream.JetStream, cfg SinkConfig[T]) (*Sink[T], error) {
	if js == nil {
		return nil, errors.New("fanoutnats: NewSink: nil JetStream")
	}
	if cfg.SubjectOf == nil && !ValidSubject(cfg.Subject) {
		return nil, fmt.Errorf("%w: %q (SinkConfig.Subject)", ErrInvalidSubject, cfg.Subject)
	}
	if err := checkSettings("NewSink", setting{name: "SinkConfig.Timeout", value: int64(cfg.Timeout)}); err != nil {
		return nil, err
	}
	cfg.Timeout = orDefault(cfg.Timeout, DefaultTimeout)
	return &Sink[T]{js: js, cfg: cfg}, nil
}

// RetryPolicy returns the [fanout.RetryPolicy] for a recorder writing to a
// [Sink]: [fanout.DefaultRetryPolicy] (12 tries 10 s apart, the first pause
// random) with [Retryable] as its classifier, so that a time-out or a
// missing stream is retried and a payload too large or a permissions
// violation is dropped at once, as [fanout.DropRejected].
func RetryPolicy() fanout.RetryPolicy {
	p := fanout.DefaultRetryPolicy()
	p.Retryable = Retryable
	return p
}

// Create publishes v and returns it once the stream has acknowledged it.
func (s *Sink[T]) Create(ctx context.Context, v T) (T, error) {
	return v, s.publish(ctx, v)
}

// Update publishes v, as Create does: the stream keeps every record.
func (s *Sink[T]) Update(ctx context.Context, v T) (T, error) {
	return v, s.publish(ctx, v)
}

func (s *Sink[T]) publish(ctx context.Context, v T) error {
	subject, data, id, err := s.prepare(v)
	if err != nil {
		s.failures.Add(1)
		return err
	}
	if ctx == nil {
		s.failures.Add(1)
		return errNilContext
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	nc := s.js.Conn()
	before := nc.LastError()
	ack, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}, jetstream.WithMsgID(id),
		jetstream.WithRetryAttempts(0)) // the recorder's policy retries
	if err != nil {
		if perr := denied(nc, before, "Publish", subject); perr != nil {
			err = perr
		}
		s.failures.Add(1)
		return &Error{Op: "publish", Subject: subject, Err: err}
	}
	if ack.Duplicate {
		s.duplicates.Add(1)
	} else {
		s.published.Add(1)
	}
	return nil
}

// prepare returns a value's subject, payload and message ID.
func (s *Sink[T]) prepare(v T) (subject string, data []byte, id string, err error) {
	subject = s.cfg.Subject
	if s.cfg.SubjectOf != nil {
		if perr := guard.Call(func() { subject = s.cfg.SubjectOf(v) }); perr != nil {
			return "", nil, "", &Error{Op: "subject", Err: fmt.Errorf("%w: SubjectOf panicked: %w", ErrInvalidSubject, perr)}
		}
	}
	if !ValidSubject(subject) {
		return "", nil, "", &Error{Op: "subject", Err: fmt.Errorf("%w: %q", ErrInvalidSubject, subject)}
	}
	data, err = s.cfg.Codec.encode(v)
	if err != nil {
		return "", nil, "", &Error{Op: "encode", Subject: subject, Err: err}
	}
	if s.cfg.MsgID != nil {
		if perr := guard.Call(func() { id = s.cfg.MsgID(v) }); perr != nil {
			return "", nil, "", &Error{Op: "publish", Subject: subject, Err: fmt.Errorf("%w: %w", errMsgIDPanicked, perr)}
		}
		return subject, data, id, nil
	}
	h := sha256.New()
	h.Write([]byte(subject))
	h.Write([]byte{0})
	h.Write(data)
	return subject, data, hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// SinkStats is a snapshot of a [Sink]'s counters; the recorder's own
// ([fanout.Recorder.Stats]) say what became of each value.
type SinkStats struct {
	// Published counts writes the stream acknowledged as new records.
	Published uint64
	// Duplicates counts writes the stream acknowledged as duplicates of a
	// record it had already stored (a retry after a lost ack), so not
	// stored again.
	Duplicates uint64
	// Failures counts writes that failed, before the recorder's retries.
	Failures uint64
}

// Stats returns the sink's counters.
func (s *Sink[T]) Stats() SinkStats {
	return SinkStats{Published: s.published.Load(), Duplicates: s.duplicates.Load(), Failures: s.failures.Load()}
}

// Metrics returns the sink's counters as Prometheus samples: those of
// [SinkStats.Metrics], read at each call. It makes the sink a
// [fanout.MetricSource].
func (s *Sink[T]) Metrics() []fanout.Metric { return s.Stats().Metrics() }

// Metrics returns the statistics as Prometheus samples:
// fanoutnats_sink_writes_total{result=published|duplicate|failed}.
func (s SinkStats) Metrics() []fanout.Metric {
	const name, help = "fanoutnats_sink_writes_total", "JetStream writes of the recorder sink, by outcome."
	return []fanout.Metric{
		counter(name, help, s.Published, label("result", "published")),
		counter(name, help, s.Duplicates, label("result", "duplicate")),
		counter(name, help, s.Failures, label("result", "failed")),
	}
}
