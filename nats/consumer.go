package fanoutnats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/internal/guard"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Start says where in a stream a [Consumer] begins: the JetStream form of
// the core's registration and replay. The zero Start is [StartNew].
type Start struct {
	kind startKind
	seq  uint64
	time time.Time
}

type startKind uint8

const (
	startNew startKind = iota
	startAll
	startSeq
	startTime
	startLast
)

// StartNew begins with the first message stored after the consumer is
// created, as a watcher receives the values accepted after Watch returns
// (an ordered consumer: after the stream's last message when Consume
// looks it up, so that a reset of the consumer before its first delivery
// skips nothing). It is the zero [Start].
func StartNew() Start { return Start{} }

// StartAll begins with the first message the stream holds.
func StartAll() Start { return Start{kind: startAll} }

// StartAtSequence begins with the message of stream sequence seq (or the
// first after it, if seq was deleted or filtered out).
func StartAtSequence(seq uint64) Start { return Start{kind: startSeq, seq: seq} }

// StartAtTime begins with the first message stored at or after t.
func StartAtTime(t time.Time) Start { return Start{kind: startTime, time: t} }

// StartLast begins with the n-th last message of the stream, so that the
// last n values are replayed before the new ones, with no gap between
// them. Messages deleted from the stream are not counted. With FilterSubjects, it counts the stream's messages, of any
// subject, and delivers those of them that match. StartLast(0) is
// [StartNew].
func StartLast(n uint64) Start { return Start{kind: startLast, seq: n} }

// ConsumeConfig configures [Consume]. Stream is required.
type ConsumeConfig[T any] struct {
	// Stream is the JetStream stream to consume.
	Stream string
	// Durable, if set, names a durable consumer, created if it does not
	// exist (a pull consumer acknowledging with AckAll). The consumer
	// acknowledges a message only once every lossless watcher of the
	// local broadcaster has taken its values (see "Acknowledgement" in the
	// package documentation), and resumes where the last one left off.
	// Give each process, and each Consume, its own durable: two
	// Consumes of one durable do not share its values, each takes the
	// other's deliveries for gaps and resets the durable, so values are
	// delivered again (counted as duplicates; none is lost). Empty means an
	// ordered consumer: ephemeral, never acknowledging, recreated by the
	// client as needed.
	Durable string
	// FilterSubjects limits the consumer to these subjects of the stream.
	FilterSubjects []string
	// Start says where a new consumer begins; an existing durable resumes
	// from its ack floor instead. The zero value is [StartNew].
	Start Start
	// Codec decodes the payloads; the zero Codec is JSON.
	Codec Codec[T]
	// AckWait is how long the server waits for a durable consumer's ack
	// before redelivering, when the durable is created. Zero means the
	// server's default (30 s). A message is acknowledged once the local
	// lossless watchers have taken its values: with watchers that take
	// longer than AckWait, the server redelivers what they hold, and the
	// consumer skips the copies (counted in [InboundStats].Duplicates).
	AckWait time.Duration
	// MaxAckPending bounds a new durable consumer's unacknowledged
	// messages: those in the NATS client's buffer, those being delivered,
	// and those the lossless watchers have not taken yet. Zero means the
	// server's default (1000).
	MaxAckPending int
	// OnError, if set, is called with an [*Error] for every message that
	// did not decode or that the broadcaster refused, and for errors of the
	// consumer. It runs on the consumer's goroutine, and for an
	// acknowledgement that failed or went unconfirmed on its acknowledger's
	// (a durable's): never two calls at once. A panic in it is contained
	// and counted.
	OnError func(error)
	// Logger, if set, logs the same failures at level Warn.
	Logger *slog.Logger
}

// Consumer publishes the values of a JetStream stream into a local
// [fanout.Broadcaster], in the stream's order, so that one consumer serves
// any number of local watchers. It owns one goroutine (and the NATS
// client's for the pull subscription), and a durable one a second, which
// acknowledges what the lossless watchers took. Create one with [Consume];
// stop it with [Consumer.Close].
type Consumer[T any] struct {
	in      inbound[T]
	js      jetstream.JetStream
	cons    jetstream.Consumer
	stream  string
	durable string
	ack     *acker // durable only

	mu      sync.Mutex
	it      jetstream.MessagesContext
	closing bool
	// drained: the goroutine drained an ordered consumer's iterator for
	// Close (see drainOrdered).
	drained bool
	// wait bounds the wait for the next message; a reconnect cancels it
	// (nudge), so that the durable is reset (see reconnected).
	wait       context.Context
	cancelWait context.CancelFunc
	nudged     atomic.Bool

	// Owned by the goroutine: the last stream sequence delivered (or
	// terminated) and the last consumer sequence seen, to skip redeliveries
	// and detect gaps (durable only).
	lastSeq, lastCseq uint64
	// refused is the message the broadcaster refused (it shut down), if
	// any: negatively acknowledged when the consumer finishes.
	refused jetstream.Msg
	// ended is the terminal error the iterator returned before it closed
	// (the consumer was deleted, say): why the consumer stopped.
	ended error
}

// Consume starts publishing the messages of cfg.Stream into b, as cfg
// says. ctx bounds the set-up calls to JetStream, each of which is tried
// again when it got no answer within [DefaultTimeout] or found no
// responder (a server restarting), 3 attempts at most. It returns an error if js
// or b is nil, if the stream does not exist, if the consumer cannot be
// created, or if an existing durable is not a pull consumer acknowledging
// with AckAll or filters other subjects than FilterSubjects.
//
// An existing durable is reset to its ack floor when Consume starts it
// (the consumer reset API, nats-server 2.14 or later): the values after the
// ack floor are redelivered in the stream's order, so a value a crashed
// process had not acknowledged (see "Acknowledgement" in the package
// documentation) is not lost, and the order holds.
func Consume[T any](ctx context.Context, js jetstream.JetStream, b *fanout.Broadcaster[T], cfg ConsumeConfig[T]) (*Consumer[T], error) {
	if js == nil || b == nil {
		return nil, errors.New("fanoutnats: Consume: nil JetStream or broadcaster")
	}
	if ctx == nil {
		return nil, errNilContext
	}
	if cfg.Stream == "" {
		return nil, errors.New("fanoutnats: Consume: ConsumeConfig.Stream is required")
	}
	if err := checkSettings("Consume", setting{name: "ConsumeConfig.AckWait", value: int64(cfg.AckWait)},
		setting{name: "ConsumeConfig.MaxAckPending", value: int64(cfg.MaxAckPending)}); err != nil {
		return nil, err
	}
	if err := filterErr("Consume", "ConsumeConfig.FilterSubjects", cfg.FilterSubjects...); err != nil {
		return nil, err
	}
	c := &Consumer[T]{js: js, stream: cfg.Stream, durable: cfg.Durable}
	var err error
	c.cons, err = setUp(ctx, js, cfg)
	if err != nil {
		return nil, &Error{Op: "consume", Subject: cfg.Stream, Err: err}
	}
	c.it, err = c.cons.Messages(pullExpiry)
	if err != nil {
		return nil, &Error{Op: "consume", Subject: cfg.Stream, Err: err}
	}
	c.in.init(b, cfg.Codec, cfg.OnError, cfg.Logger)
	c.wait, c.cancelWait = context.WithCancel(c.in.ctx)
	if cfg.Durable != "" {
		c.ack = newAcker(js.Conn(), b.Taken, c.ackFloor, &c.in.rep, c.in.ctx)
		c.ack.onReconnect = c.nudge
		c.ack.start()
	}
	go c.run()
	return c, nil
}

// ackFloor returns the durable's ack floor, as the server has it.
func (c *Consumer[T]) ackFloor(ctx context.Context) (uint64, error) {
	info, err := c.cons.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.AckFloor.Stream, nil
}

// setUpAttempts bounds the attempts of setUp.
const setUpAttempts = 3

// setUp finds the stream, then creates or finds the consumer. A request
// that got no answer (lost with a server that restarted, say) or found no
// responder (JetStream still starting) is tried again after
// DefaultRetryWait, each attempt bounded by DefaultTimeout, setUpAttempts
// times at most and until ctx ends.
func setUp[T any](ctx context.Context, js jetstream.JetStream, cfg ConsumeConfig[T]) (jetstream.Consumer, error) {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, DefaultTimeout)
		cons, err := setUpOnce(actx, js, cfg)
		cancel()
		lost := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)
		if err == nil || !lost || attempt == setUpAttempts || ctx.Err() != nil {
			return cons, err
		}
		if !guard.Sleep(ctx, DefaultRetryWait) {
			return nil, err
		}
	}
}

func setUpOnce[T any](ctx context.Context, js jetstream.JetStream, cfg ConsumeConfig[T]) (jetstream.Consumer, error) {
	stream, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		return nil, err
	}
	if cfg.Start.kind == startLast && stream.CachedInfo().State.NumDeleted > 0 {
		// StartLast counts messages: it needs the deleted sequences.
		if _, err := stream.Info(ctx, jetstream.WithDeletedDetails(true)); err != nil {
			return nil, err
		}
	}
	if cfg.Durable == "" {
		return orderedConsumer(ctx, stream, cfg)
	}
	return durableConsumer(ctx, js, stream, cfg)
}

// deliverPolicy translates a Start into JetStream's terms.
func deliverPolicy(s Start, info *jetstream.StreamInfo) (jetstream.DeliverPolicy, uint64, *time.Time) {
	switch s.kind {
	case startAll:
		return jetstream.DeliverAllPolicy, 0, nil
	case startSeq:
		return jetstream.DeliverByStartSequencePolicy, max(s.seq, 1), nil
	case startTime:
		t := s.time
		return jetstream.DeliverByStartTimePolicy, 0, &t
	case startLast:
		last := info.State.LastSeq
		if s.seq == 0 || last == 0 {
			return jetstream.DeliverNewPolicy, 0, nil
		}
		return jetstream.DeliverByStartSequencePolicy, lastN(info, s.seq), nil
	}
	return jetstream.DeliverNewPolicy, 0, nil
}

// lastN returns the stream sequence of the n-th last message the stream
// holds (its first, if it holds fewer), skipping the sequences deleted in
// between (info.State.Deleted, fetched when there are any). A stream that
// holds none (purged, or every message expired: its first sequence is
// then one past its last) gives that first sequence: the next one stored.
func lastN(info *jetstream.StreamInfo, n uint64) uint64 {
	first, last := max(info.State.FirstSeq, 1), info.State.LastSeq
	if first > last {
		return first
	}
	deleted := info.State.Deleted // ascending
	if len(deleted) == 0 {
		if n > last-first {
			return first
		}
		return last - n + 1
	}
	for held, seq, i := uint64(0), last, len(deleted)-1; seq >= first; seq-- {
		for i >= 0 && deleted[i] > seq {
			i--
		}
		if i >= 0 && deleted[i] == seq {
			continue
		}
		if held++; held == n {
			return seq
		}
		if seq == first {
			break
		}
	}
	return first
}

func orderedConsumer[T any](ctx context.Context, stream jetstream.Stream, cfg ConsumeConfig[T]) (jetstream.Consumer, error) {
	info := stream.CachedInfo()
	policy, seq, t := deliverPolicy(cfg.Start, info)
	if policy == jetstream.DeliverNewPolicy {
		// nats.go recreates an ordered consumer that has delivered nothing
		// yet (a server restart, missed heartbeats) with its first policy:
		// "new" again would skip what was stored meanwhile. The sequence
		// after the last one stored when the stream was looked up, just
		// now, is "new" once and for all.
		policy, seq = jetstream.DeliverByStartSequencePolicy, info.State.LastSeq+1
	}
	return stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: cfg.FilterSubjects,
		DeliverPolicy:  policy,
		OptStartSeq:    seq,
		OptStartTime:   t,
	})
}

func durableConsumer[T any](ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, cfg ConsumeConfig[T]) (jetstream.Consumer, error) {
	cons, err := stream.Consumer(ctx, cfg.Durable)
	created := errors.Is(err, jetstream.ErrConsumerNotFound)
	if created {
		policy, seq, t := deliverPolicy(cfg.Start, stream.CachedInfo())
		cons, err = stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:        cfg.Durable,
			FilterSubjects: cfg.FilterSubjects,
			DeliverPolicy:  policy,
			OptStartSeq:    seq,
			OptStartTime:   t,
			AckPolicy:      jetstream.AckAllPolicy,
			AckWait:        cfg.AckWait,
			MaxAckPending:  cfg.MaxAckPending,
			MaxDeliver:     -1,
		})
	}
	if err != nil {
		return nil, err
	}
	if err := checkDurable(cons.CachedInfo()); err != nil {
		return nil, err
	}
	if err := checkFilters(cons.CachedInfo(), cfg.FilterSubjects); err != nil {
		return nil, err
	}
	if created { // nothing delivered yet: nothing to reset (and, in a cluster, maybe no consumer leader yet to answer)
		return cons, nil
	}
	if _, err := js.ResetConsumer(ctx, cfg.Stream, cfg.Durable); err != nil {
		return nil, fmt.Errorf("resetting durable %q to its ack floor (needs nats-server 2.14 or later): %w", cfg.Durable, err)
	}
	return cons, nil
}

// checkDurable returns an error unless an existing durable is a pull
// consumer acknowledging with AckAll.
func checkDurable(info *jetstream.ConsumerInfo) error {
	switch {
	case info.Config.DeliverSubject != "":
		return fmt.Errorf("durable %q is a push consumer; Consume needs a pull consumer", info.Name)
	case info.Config.AckPolicy == jetstream.AckExplicitPolicy:
		return fmt.Errorf("durable %q acknowledges each message (AckExplicit); Consume acknowledges with AckAll: "+
			"delete it and Consume again with Start: StartAtSequence(%d) to resume after its ack floor",
			info.Name, info.AckFloor.Stream+1)
	case info.Config.AckPolicy != jetstream.AckAllPolicy:
		return fmt.Errorf("durable %q does not acknowledge with AckAll (%v)", info.Name, info.Config.AckPolicy)
	}
	return nil
}

// checkFilters returns an error unless an existing durable filters the
// subjects asked for (in any order): it would deliver others, silently.
func checkFilters(info *jetstream.ConsumerInfo, want []string) error {
	have := slices.Clone(info.Config.FilterSubjects)
	if info.Config.FilterSubject != "" {
		have = append(have, info.Config.FilterSubject)
	}
	want = slices.Clone(want)
	slices.Sort(have)
	slices.Sort(want)
	if slices.Equal(slices.Compact(have), slices.Compact(want)) {
		return nil
	}
	return fmt.Errorf("durable %q filters subjects %q, not %q (ConsumeConfig.FilterSubjects): "+
		"consume it with its filters, or give the new filters a durable of their own", info.Name, have, want)
}

// Close stops the consumer. It stops pulling at once, then waits until
// the messages already received are published into the broadcaster and,
// for a durable, until the local lossless watchers have taken their values
// (stop the watchers that will not read any more first); a durable then
// acknowledges them and has the server confirm its ack floor, so that the
// durable's next consumer begins after them. If ctx ends first, it gives up
// the rest and returns ctx.Err() without waiting further (see
// [Consumer.Done]); a durable acknowledges what was taken, unconfirmed,
// and the rest is redelivered to its next consumer. Otherwise it returns
// an error wrapping [ErrAckUnconfirmed] if the server did not confirm the
// floor. It is idempotent. A nil ctx is an error: nothing is closed.
func (c *Consumer[T]) Close(ctx context.Context) error {
	err := c.in.close(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.closing = true
		if c.durable == "" {
			c.cancelWait() // the goroutine drains it (see drainOrdered)
			return
		}
		c.it.Drain()
	})
	if err == nil && c.ack != nil {
		err = c.ack.err
	}
	return err
}

// Done returns a channel closed when the consumer's goroutine has exited:
// after Close, once the broadcaster is shut down, or once the consumer
// ended on an error (see [Consumer.Err]).
func (c *Consumer[T]) Done() <-chan struct{} { return c.in.done }

// Err returns why the consumer stopped on its own: [fanout.ErrStopped] (the
// broadcaster shut down), or the JetStream error that ended it (the
// consumer was deleted, the connection closed, ...). It is nil while the
// consumer runs and after Close.
func (c *Consumer[T]) Err() error { return c.in.getErr() }

// Metrics returns the consumer's counters as Prometheus samples: those of
// [InboundStats.Metrics], read at each call. It makes the consumer a
// [fanout.MetricSource].
func (c *Consumer[T]) Metrics() []fanout.Metric { return c.Stats().Metrics() }

// Stats returns the consumer's counters. They stay readable after Close.
func (c *Consumer[T]) Stats() InboundStats {
	st := c.in.stats()
	if a := c.ack; a != nil {
		st.Acks = a.sentAcks.Load()
		st.AcksConfirmed = a.confirmedN.Load()
		st.AcksUnconfirmed = a.unconfirmed.Load()
		st.AckFloor = a.floorNow.Load()
		st.Reconnects = a.reconnects.Load()
	}
	return st
}

func (c *Consumer[T]) run() {
	defer close(c.in.done)
	defer c.finish()
	for {
		it, wait := c.iterator()
		msg, err := it.Next(jetstream.NextContext(wait))
		if err != nil && c.drainOrdered() {
			continue
		}
		if err != nil && c.in.ctx.Err() == nil && c.nudged.Swap(false) {
			if !c.reconnected() {
				return
			}
			continue
		}
		if err != nil {
			if !c.onNextError(err) {
				return
			}
			continue
		}
		if !c.handle(msg) {
			return
		}
	}
}

// drainOrdered drains an ordered consumer's iterator for Close, on the
// consumer's goroutine, and reports whether it did (the loop then goes on
// taking what the iterator buffered). nats.go v1.55's ordered iterator
// replaces its inner subscription within Next when it resets, without
// looking whether it was stopped meanwhile: a Drain from Close's goroutine
// during a reset left the new inner subscription pulling for ever (two
// goroutines that goleak found in one run in about ten of this package).
// Close only cancels the wait of the Next under way.
func (c *Consumer[T]) drainOrdered() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.durable != "" || !c.closing || c.drained || c.in.ctx.Err() != nil {
		return false
	}
	c.drained = true
	c.it.Drain()
	c.wait, c.cancelWait = context.WithCancel(c.in.ctx)
	return true
}

func (c *Consumer[T]) iterator() (jetstream.MessagesContext, context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.it, c.wait
}

// nudge tells the consumer's goroutine that the connection reconnected: it
// ends the wait for the next message. It runs on the acker's goroutine.
func (c *Consumer[T]) nudge() {
	c.nudged.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelWait()
}

// reconnected resets the durable to its ack floor after a reconnect: the
// messages the server sent while the connection was down are lost, and
// when no later one comes to show the gap, the server would redeliver
// them only after AckWait (the process test of this package stalled for
// the 30 s default after a server restart). The values delivered again
// are skipped. It reports whether to go on.
func (c *Consumer[T]) reconnected() bool {
	c.mu.Lock()
	c.wait, c.cancelWait = context.WithCancel(c.in.ctx)
	c.mu.Unlock()
	return c.repairGap()
}

// finish ends the consumer: it stops the iterator. A durable's waits until
// its subscription is gone, so that a successor's reset (see Consume) cannot
// have values delivered to this consumer's old inbox, where they would wait
// for AckWait; then it negatively acknowledges the value the broadcaster
// refused, if any, so that another consumer of the durable gets it at once,
// and waits for the acker to acknowledge what the watchers take (see
// acker.finish). (An ordered consumer has neither acks nor resets, and its
// Closed starts a goroutine that nats.go v1.55 never ends: it is only
// stopped.)
func (c *Consumer[T]) finish() {
	c.mu.Lock()
	it := c.it
	c.cancelWait()
	c.mu.Unlock()
	if c.durable == "" {
		it.Stop()
		return
	}
	c.stopAndWait(it)
	if msg := c.refused; msg != nil {
		if err := msg.Nak(); err != nil {
			c.in.rep.report(&Error{Op: "nak", Subject: msg.Subject(), Err: err})
		}
	}
	c.ack.end()
}

// onNextError decides what an error of the iterator means, and reports
// whether to go on.
func (c *Consumer[T]) onNextError(err error) bool {
	switch {
	case isClosing(err):
		return false // Close gave up
	case errors.Is(err, jetstream.ErrMsgIteratorClosed):
		c.mu.Lock()
		closing := c.closing
		c.mu.Unlock()
		if !closing { // the iterator ended on its own: report why
			cause := err
			if c.ended != nil {
				cause = c.ended
			}
			if c.js.Conn().IsClosed() {
				cause = nats.ErrConnectionClosed
			}
			c.in.setErr(cause)
			c.in.rep.report(&Error{Op: "consume", Subject: c.stream, Err: err})
		}
		return false
	}
	// Missing heartbeats, a reconnect, a consumer status: the iterator
	// goes on (a terminal status closes it, and the next call says so:
	// the status is then why the consumer stopped).
	if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrBadRequest) {
		c.ended = err // nats.go's terminal statuses (pullSubscription.handleStatusMsg)
	}
	c.in.rep.report(&Error{Op: "consume", Subject: c.stream, Err: err})
	return true
}

// handle delivers one message and reports whether to go on.
func (c *Consumer[T]) handle(msg jetstream.Msg) bool {
	meta, err := msg.Metadata()
	if err != nil { // not a JetStream message: cannot be placed in the order
		c.in.received.Add(1)
		c.in.undecodable(msg.Subject(), 0, err)
		return true
	}
	seq := meta.Sequence.Stream
	if c.durable != "" {
		switch c.checkDurable(meta) {
		case seqGap:
			return c.repairGap()
		case seqDuplicate:
			c.in.duplicates.Add(c.in.receivedNotDelivered(msg.Headers(), msg.Data()))
			c.ack.redelivered(seq, meta.Sequence.Consumer, msg.Reply())
			return true
		}
	}
	out, need := c.in.deliver(msg.Subject(), seq, msg.Headers(), msg.Data())
	if c.durable == "" {
		return out != refused
	}
	switch out {
	case refused:
		c.refused = msg // negatively acknowledged once the iterator is gone (see finish)
		return false
	case undecodable:
		need = 0 // acknowledged with the values before it
	}
	c.lastSeq = seq
	c.ack.add(seq, meta.Sequence.Consumer, msg.Reply(), need)
	return true
}

type seqCheck uint8

const (
	seqNext      seqCheck = iota // deliver it
	seqDuplicate                 // delivered before: ack and skip
	seqGap                       // a delivery before it was lost: reset
)

// checkDurable places a durable's message in the order. Deliveries carry
// consecutive consumer sequences (1 after a reset), redeliveries included,
// so a jump means one was lost on the way (a reconnect); accepting this
// message would put it before the lost one, which would then be skipped.
// A stream sequence at or below the last delivered one is a redelivery of
// a value already delivered (its ack was lost).
func (c *Consumer[T]) checkDurable(meta *jetstream.MsgMetadata) seqCheck {
	if meta.Sequence.Consumer != c.lastCseq+1 {
		return seqGap
	}
	c.lastCseq = meta.Sequence.Consumer
	if meta.Sequence.Stream <= c.lastSeq {
		return seqDuplicate
	}
	return seqNext
}

// repairGap restarts delivery after the last value delivered: it stops the
// iterator (discarding what it buffered, unacknowledged), resets the
// durable to its ack floor, and pulls again; values up to the last one
// delivered come again and are skipped as duplicates. It reports whether
// to go on. c.mu is not held during the calls to the server, so that Close
// never waits for them.
func (c *Consumer[T]) repairGap() bool {
	c.in.resets.Add(1)
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		closing, it := c.closing, c.it
		c.mu.Unlock()
		if closing {
			return false // what was buffered is redelivered to the next consumer
		}
		c.stopAndWait(it)
		if attempt > 0 && !guard.Sleep(c.in.ctx, DefaultRetryWait) {
			return false
		}
		next, err := c.resetAcked()
		if err != nil {
			c.in.rep.report(&Error{Op: "consume", Subject: c.stream, Err: fmt.Errorf("repairing a gap: %w", err)})
			if errors.Is(err, nats.ErrConnectionClosed) {
				c.in.setErr(err)
				return false
			}
			if gone := c.gone(); gone != nil {
				c.in.setErr(gone)
				c.in.rep.report(&Error{Op: "consume", Subject: c.stream, Err: gone})
				return false
			}
			continue
		}
		c.mu.Lock()
		c.it = next
		if c.closing {
			next.Drain()
		}
		c.mu.Unlock()
		c.lastCseq = 0
		return true
	}
}

// gone returns the error saying that the durable or its stream no longer
// exists (deleted by an operator, or a memory stream lost with a server
// restart), and nil if it exists or the server does not answer. A reset of
// a consumer that does not exist gets no answer at all, so repairGap asks.
func (c *Consumer[T]) gone() error {
	ctx, cancel := context.WithTimeout(c.in.ctx, DefaultTimeout)
	defer cancel()
	_, err := c.js.Consumer(ctx, c.stream, c.durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	return nil
}

// closedNotifier is implemented by nats.go's pull iterators: Closed
// returns a channel closed once the iterator's subscription is gone.
type closedNotifier interface{ Closed() <-chan struct{} }

// stopAndWait stops an iterator and waits until its subscription is gone.
// Stop only asks the iterator's goroutine to unsubscribe; a reset sent
// before the unsubscription would let the server deliver the first values
// after the reset to the old inbox, where they are lost, and the consumer
// would find a gap again. Closed is asked again every millisecond: in
// nats.go v1.55 a channel it returned while the unsubscription was under
// way may never be closed, while a call after it returns a closed one.
func (c *Consumer[T]) stopAndWait(it jetstream.MessagesContext) {
	it.Stop()
	cn, ok := it.(closedNotifier)
	if !ok {
		return
	}
	deadline := time.NewTimer(DefaultTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-cn.Closed():
			return
		case <-poll.C:
		case <-deadline.C:
			return
		case <-c.in.ctx.Done():
			return
		}
	}
}

// resetAcked resets the durable with the acker's replies dropped and no
// acknowledgement sent meanwhile (see acker).
func (c *Consumer[T]) resetAcked() (jetstream.MessagesContext, error) {
	c.ack.sendMu.Lock()
	defer c.ack.sendMu.Unlock()
	c.ack.invalidate()
	return c.resetOnce()
}

func (c *Consumer[T]) resetOnce() (jetstream.MessagesContext, error) {
	ctx, cancel := context.WithTimeout(c.in.ctx, DefaultTimeout)
	defer cancel()
	if _, err := c.js.ResetConsumer(ctx, c.stream, c.durable); err != nil {
		return nil, err
	}
	return c.cons.Messages(pullExpiry)
}

// pullExpiry is how long a pull request of a Consumer lasts. The NATS
// client sends heartbeats every half of it and reports them missing after
// twice that, then pulls again: so a pull request lost with a server (a
// cluster node that died, say) is replaced within about 5 s instead of the
// client's default of 30 s (the cluster test of this package saw a
// consumer stall for 30 s after the stream leader's shutdown).
var pullExpiry = jetstream.PullExpiry(5 * time.Second)
