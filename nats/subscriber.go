package fanoutnats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/fanout-go/fanout"
	"github.com/nats-io/nats.go"
)

// DefaultBuffer is the number of messages the NATS client may hold for a
// [Subscriber] that has not taken them yet.
const DefaultBuffer = 64 * 1024

// MaxBuffer is the largest [SubscribeConfig].Buffer [Subscribe] accepts
// (16,777,216 messages, the core's [fanout.MaxQueueLength]): the buffer is
// allocated whole.
const MaxBuffer = fanout.MaxQueueLength

// SubscribeConfig configures [Subscribe]. Subject is required.
type SubscribeConfig[T any] struct {
	// Subject is the subject to subscribe to; it may hold wildcards.
	Subject string
	// Codec decodes the payloads; the zero Codec is JSON.
	Codec Codec[T]
	// Buffer is the number of messages the NATS client may hold for the
	// subscriber while it waits for the local broadcaster. Beyond it, the
	// client drops messages (core NATS is at most once), counted in
	// [InboundStats].SlowConsumerDropped and reported. The default is
	// [DefaultBuffer], the most [MaxBuffer].
	Buffer int
	// OnError, if set, is called with an [*Error] for every message that
	// did not decode or that the broadcaster refused, and when the client
	// dropped messages. It runs on the subscriber's goroutine; a panic in
	// it is contained and counted.
	OnError func(error)
	// Logger, if set, logs the same failures at level Warn.
	Logger *slog.Logger
}

// Subscriber publishes the values of a core NATS subscription into a local
// [fanout.Broadcaster], so that one network subscription serves any number
// of local watchers, each with its own queue and strategy. Its goroutine
// decodes each message and publishes the value with
// [fanout.Broadcaster.ActionContext], waiting as the watchers' behaviours
// say; a second one reads the connection's status events. Create one with
// [Subscribe]; stop it with [Subscriber.Close].
type Subscriber[T any] struct {
	in      inbound[T]
	nc      *nats.Conn
	sub     *nats.Subscription
	subject string
	ch      chan *nats.Msg
	closing chan struct{} // closed by Close after unsubscribing
	once    chanOnce
	// status carries the connection's events to watchStatus, which closes
	// connClosed when the connection closes, and statusDone as it ends.
	status     chan nats.Status
	connClosed chan struct{}
	statusDone chan struct{}
	dropped    atomic.Uint64 // the client's drop count, kept past Unsubscribe
	// reported is the part of dropped reported (owned by the goroutine).
	reported uint64
}

// Subscribe subscribes to cfg.Subject on nc and publishes every decoded
// value into b. When it returns, the server has registered the
// subscription: every message published after that reaches the
// subscriber. It returns an error if nc or b is nil, if Buffer is negative
// or above [MaxBuffer], if the subject is invalid, if the subscription
// cannot be made, or if the server denies it (an error wrapping
// [nats.ErrPermissionViolation]).
func Subscribe[T any](nc *nats.Conn, b *fanout.Broadcaster[T], cfg SubscribeConfig[T]) (*Subscriber[T], error) {
	if nc == nil || b == nil {
		return nil, errors.New("fanoutnats: Subscribe: nil connection or broadcaster")
	}
	if err := checkSettings("Subscribe", bounded("SubscribeConfig.Buffer", cfg.Buffer, "MaxBuffer", MaxBuffer)); err != nil {
		return nil, err
	}
	if err := filterErr("Subscribe", "SubscribeConfig.Subject", cfg.Subject); err != nil {
		return nil, err
	}
	s := &Subscriber[T]{nc: nc, subject: cfg.Subject, closing: make(chan struct{})}
	s.ch = make(chan *nats.Msg, orDefault(cfg.Buffer, DefaultBuffer))
	before := nc.LastError()
	sub, err := nc.ChanSubscribe(cfg.Subject, s.ch)
	if err != nil {
		return nil, &Error{Op: "subscribe", Subject: cfg.Subject, Err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	err = nc.FlushWithContext(ctx)
	if err == nil {
		err = denied(nc, before, "Subscription", cfg.Subject)
	}
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, &Error{Op: "subscribe", Subject: cfg.Subject, Err: err}
	}
	s.sub = sub
	s.status = nc.StatusChanged(nats.CLOSED, nats.CONNECTED)
	s.connClosed, s.statusDone = make(chan struct{}), make(chan struct{})
	s.in.init(b, cfg.Codec, cfg.OnError, cfg.Logger)
	go s.watchStatus()
	go s.run()
	return s, nil
}

// Close stops the subscriber. It reads the NATS client's count of messages
// dropped for the subscription (which the client forgets with it) and
// unsubscribes at once, then waits until the messages the client had
// already received are published into the broadcaster. If ctx ends
// first, it gives up the rest (counted as abandoned) and returns ctx.Err()
// without waiting further (see [Subscriber.Done]). It never waits for a
// dead server longer than ctx allows. It is idempotent. A nil ctx is an
// error: nothing is closed.
func (s *Subscriber[T]) Close(ctx context.Context) error {
	return s.in.close(ctx, s.unsubscribe)
}

// unsubscribe reads the client's drop count, which it forgets once
// unsubscribed, and unsubscribes, once.
func (s *Subscriber[T]) unsubscribe() {
	s.once.do(s.closing, func() {
		s.droppedNow()
		_ = s.sub.Unsubscribe()
	})
}

// Done returns a channel closed when the subscriber's goroutine has exited:
// after Close, once the broadcaster is shut down, or once the connection
// is closed.
func (s *Subscriber[T]) Done() <-chan struct{} { return s.in.done }

// Err returns why the subscriber stopped on its own: [fanout.ErrStopped]
// (the broadcaster shut down) or [nats.ErrConnectionClosed]. It is nil
// while the subscriber runs and after Close.
func (s *Subscriber[T]) Err() error { return s.in.getErr() }

// Metrics returns the subscriber's counters as Prometheus samples: those
// of [InboundStats.Metrics], read at each call. It makes the subscriber a
// [fanout.MetricSource].
func (s *Subscriber[T]) Metrics() []fanout.Metric { return s.Stats().Metrics() }

// Stats returns the subscriber's counters. They stay readable after Close.
func (s *Subscriber[T]) Stats() InboundStats {
	st := s.in.stats()
	st.Pending = len(s.ch)
	st.SlowConsumerDropped = s.droppedNow()
	return st
}

func (s *Subscriber[T]) run() {
	defer close(s.in.done)
	defer s.reportDrops() // those since the last message, read before unsubscribing
	defer s.stopStatus()
	for {
		select {
		case m := <-s.ch:
			if !s.handle(m) {
				return
			}
			s.reportDrops()
		case <-s.closing:
			s.drain()
			return
		case <-s.connClosed:
			s.in.setErr(nats.ErrConnectionClosed)
			s.stop()
			return
		case <-s.in.ctx.Done():
			s.stop()
			return
		}
	}
}

// watchStatus counts the connection's reconnects and closes connClosed
// when it closes, until stopStatus removes the listener. It runs apart
// from run, which may wait for a slow watcher for long: the client sends
// status events without blocking, and drops those beyond the channel's
// 10, which would lose reconnects and the close itself.
func (s *Subscriber[T]) watchStatus() {
	defer close(s.statusDone)
	closed := false
	signal := func() {
		if !closed {
			closed = true
			close(s.connClosed)
		}
	}
	if s.nc.IsClosed() { // before the listener was registered: no event comes
		signal()
	}
	for st := range s.status {
		if st == nats.CONNECTED {
			s.in.reconnects.Add(1)
		} else {
			signal()
		}
	}
}

// stopStatus removes the status listener, which closes its channel, and
// waits for watchStatus to end.
func (s *Subscriber[T]) stopStatus() {
	s.nc.RemoveStatusListener(s.status)
	<-s.statusDone
}

// handle delivers one message, and reports whether to go on.
func (s *Subscriber[T]) handle(m *nats.Msg) bool {
	if out, _ := s.in.deliver(m.Subject, 0, m.Header, m.Data); out == refused {
		s.stop()
		return false
	}
	return true
}

// drain delivers what the client received before Close unsubscribed.
func (s *Subscriber[T]) drain() {
	for {
		select {
		case m := <-s.ch:
			if !s.handle(m) {
				return
			}
		default:
			return
		}
	}
}

// stop unsubscribes and accounts for the messages left in the buffer:
// abandoned when Close gave up, failed otherwise (the broadcaster refused).
func (s *Subscriber[T]) stop() {
	s.unsubscribe()
	var n uint64
	for range len(s.ch) {
		msg := <-s.ch
		n += s.in.receivedNotDelivered(msg.Header, msg.Data)
	}
	if n == 0 {
		return
	}
	cause := s.in.getErr()
	if s.in.ctx.Err() != nil || cause == nil {
		s.in.abandoned.Add(n)
		cause = ErrClosed
	} else {
		s.in.failed.Add(n)
	}
	s.in.rep.report(&Error{Op: "deliver", Subject: s.subject, Err: fmt.Errorf("%d buffered values not delivered: %w", n, cause)})
}

// droppedNow returns the number of messages the client dropped for the
// subscription, read from the client while it has one: it forgets the
// count once unsubscribed, or once the connection is closed. It is called
// from any goroutine (Stats, Close).
func (s *Subscriber[T]) droppedNow() uint64 {
	n, err := s.sub.Dropped()
	for err == nil {
		old := s.dropped.Load()
		if uint64(n) <= old || s.dropped.CompareAndSwap(old, uint64(n)) {
			break
		}
	}
	return s.dropped.Load()
}

// reportDrops reports messages the client dropped since the last report.
func (s *Subscriber[T]) reportDrops() {
	n := s.droppedNow()
	if n <= s.reported {
		return
	}
	s.in.rep.report(&Error{Op: "subscribe", Subject: s.subject,
		Err: fmt.Errorf("%w: the client dropped %d messages (buffer full)", nats.ErrSlowConsumer, n-s.reported)})
	s.reported = n
}
