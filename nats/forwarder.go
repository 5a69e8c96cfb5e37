package fanoutnats

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/internal/guard"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of [ForwardConfig].
const (
	// DefaultBatch is the most values a [Forwarder] publishes per flush or
	// per round of JetStream acks.
	DefaultBatch = 256
	// DefaultTimeout bounds a flush, a JetStream ack wait and a JetStream
	// publish attempt when the configuration does not say otherwise.
	DefaultTimeout = 5 * time.Second
	// DefaultRetryWait is the pause before a [Forwarder] in JetStream mode
	// retries a publish that failed with a retryable error.
	DefaultRetryWait = 250 * time.Millisecond
	// MaxBatch is the largest [ForwardConfig].Batch [Forward] accepts
	// (16,777,216 values, the core's [fanout.MaxQueueLength]): the
	// forwarder holds a buffer of Batch values.
	MaxBatch = fanout.MaxQueueLength
)

// ForwardConfig configures [Forward]. Subject or SubjectOf is required;
// every other field has a default.
type ForwardConfig[T any] struct {
	// Subject is the subject every value is published to, unless SubjectOf
	// is set.
	Subject string
	// SubjectOf, if set, returns each value's subject. A value whose
	// subject is invalid (see [ErrInvalidSubject]), or for which SubjectOf
	// panics, is counted as failed and reported.
	SubjectOf func(v T) string
	// Codec encodes the values; the zero Codec is JSON.
	Codec Codec[T]
	// Watch holds the options of the forwarder's watcher on the
	// broadcaster, such as [fanout.WithQueueLength],
	// [fanout.WithFullChannelBehavior] and [fanout.WithDropHandler]; by
	// default the broadcaster's. The behaviour decides what a full queue
	// does to local producers when NATS is slower than they are:
	// [fanout.WaitIfChannelFull] makes them wait (back-pressure),
	// [fanout.DropOldestIfChannelFull] never slows them and counts what the
	// forwarder missed. With [fanout.WithCommit] the forwarder's watcher
	// takes a value, for [fanout.Broadcaster.Taken], once the forwarder is
	// done with it: published (with JetStream, stored: acknowledged),
	// failed or abandoned, not when it reads it; so a broadcaster fed by a
	// durable [Consume] acknowledges upstream only what went on.
	Watch []fanout.Option
	// Batch is the most values published before one flush (core NATS) or
	// one round of acks (JetStream). The default is [DefaultBatch], the
	// most [MaxBatch]. In JetStream mode, 1 keeps the publisher's order
	// even when a publish has to be retried.
	Batch int
	// FlushTimeout bounds each flush of core NATS publishes. The default
	// is [DefaultTimeout].
	FlushTimeout time.Duration
	// Frame, if 2 or more, packs up to Frame consecutive values for the
	// same subject into one NATS message, a frame (see [FrameHeader]),
	// within the server's maximum payload and one Batch, so that a
	// subscription receives values at a multiple of NATS's message rate.
	// Frames are made of what the watcher holds when the forwarder takes a
	// batch, never waited for: at low rates a frame holds one value and is
	// sent as a plain message. The order is the same as without frames,
	// and a frame is one stream message in JetStream: one sequence and one
	// message ID, the forwarder's own, or with MsgID its first value's
	// followed by "+" and its number of values. A frame holding a value for
	// which MsgID returns "" has no ID, as that value alone has none: a
	// derived ID would make the stream drop, as a duplicate, a frame of
	// other values without IDs behind the same first value. A frame the
	// stream refuses as too large (its MaxMsgSize may be below the
	// server's maximum payload, by which frames are sized) is split in
	// halves, recursively, each published with the ID a frame of its
	// values has ([ForwarderStats].Splits counts them); like a retried
	// publish, its values are then stored after the values sent with it.
	// Only a value too large alone fails. A split costs a round trip: keep
	// Frame small enough for frames to fit the stream. Every
	// receiver must understand frames ([Subscribe] and [Consume] do); a
	// frame is delivered into the local broadcaster as one batch
	// ([fanout.Broadcaster.ActionBatch]). The default, 0, sends one value
	// per message.
	Frame int

	// JetStream makes the forwarder publish through JetStream: every
	// value carries a Nats-Msg-Id header, the forwarder waits for the
	// stream's ack, and retries a publish that failed with a [Retryable]
	// error, every RetryWait, until it is acknowledged or the forwarder is
	// closed. A stream must capture the subjects.
	JetStream bool
	// MsgID returns a value's Nats-Msg-Id in JetStream mode. The default
	// is an identifier unique to the forwarder and the message, so that
	// the forwarder's own retries are recognised as duplicates by the
	// stream (within its Duplicates window, 2 minutes by default). Give
	// one derived from the value to also deduplicate values published
	// twice by different processes (with Frame, only frames that begin
	// with the same value and hold as many values are recognised). An
	// empty ID means none: the stream does not deduplicate that value, nor
	// a frame holding it, so a retry may store it twice.
	MsgID func(v T) string
	// AckTimeout bounds the wait for each JetStream ack. The default is
	// [DefaultTimeout].
	AckTimeout time.Duration
	// RetryWait is the pause before retrying a JetStream publish. The
	// default is [DefaultRetryWait].
	RetryWait time.Duration

	// OnError, if set, is called with an [*Error] for every value that
	// could not be published, every failed attempt that will be retried,
	// and every failed flush. It runs on the forwarder's goroutine, which
	// waits for it; a panic in it is contained and counted.
	OnError func(error)
	// Logger, if set, logs the same failures at level Warn.
	Logger *slog.Logger
}

// Forwarder publishes the values of a [fanout.Broadcaster] to NATS. It is
// an ordinary watcher of the broadcaster, with its own queue and full-queue
// strategy, drained by one goroutine that encodes each value, publishes it
// and flushes once per batch. Create one with [Forward]; stop it with
// [Forwarder.Close].
type Forwarder[T any] struct {
	nc  *nats.Conn
	js  jetstream.JetStream // nil in core mode
	w   *fanout.Watcher[T]
	cfg ForwardConfig[T]
	rep reporter
	// policy is the JetStream retry policy: every RetryWait, until the
	// stream acknowledges, the error is not [Retryable], or Close gives up.
	policy fanout.RetryPolicy

	idPrefix string
	nextID   uint64 // owned by the goroutine
	// recovered (owned by the goroutine) is set when a retry succeeded:
	// the next value that failed with it is retried without a pause.
	recovered bool

	ctx    context.Context // cancelled when Close gives up: abandon the rest
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error

	// out holds the messages of a batch, and ids the MsgID's of its values
	// (JetStream mode with MsgID), in order (owned by the goroutine).
	out []outMsg
	ids []string

	received, published, failed, abandoned  atomic.Uint64
	retries, duplicates, flushes, flushErrs atomic.Uint64
	bytes, frames, splits                   atomic.Uint64
}

// Forward starts forwarding the values b accepts from now on to NATS over
// nc, as cfg says. It registers a watcher on b with cfg.Watch and starts
// one goroutine. It returns an error if nc or b is nil, if a setting is
// negative, if Batch is above [MaxBatch], if no valid subject is
// configured, if a watch option is invalid, or if b is shut down.
func Forward[T any](b *fanout.Broadcaster[T], nc *nats.Conn, cfg ForwardConfig[T]) (*Forwarder[T], error) {
	if b == nil || nc == nil {
		return nil, errors.New("fanoutnats: Forward: nil broadcaster or connection")
	}
	if cfg.SubjectOf == nil && !ValidSubject(cfg.Subject) {
		return nil, fmt.Errorf("%w: %q (ForwardConfig.Subject)", ErrInvalidSubject, cfg.Subject)
	}
	if err := checkSettings("Forward", bounded("ForwardConfig.Batch", cfg.Batch, "MaxBatch", MaxBatch),
		setting{name: "ForwardConfig.Frame", value: int64(cfg.Frame)},
		setting{name: "ForwardConfig.FlushTimeout", value: int64(cfg.FlushTimeout)},
		setting{name: "ForwardConfig.AckTimeout", value: int64(cfg.AckTimeout)},
		setting{name: "ForwardConfig.RetryWait", value: int64(cfg.RetryWait)}); err != nil {
		return nil, err
	}
	cfg.Batch = orDefault(cfg.Batch, DefaultBatch)
	cfg.FlushTimeout = orDefault(cfg.FlushTimeout, DefaultTimeout)
	cfg.AckTimeout = orDefault(cfg.AckTimeout, DefaultTimeout)
	cfg.RetryWait = orDefault(cfg.RetryWait, DefaultRetryWait)
	f := &Forwarder[T]{nc: nc, cfg: cfg, rep: reporter{onError: cfg.OnError, logger: cfg.Logger}, done: make(chan struct{}),
		policy: fanout.RetryPolicy{MaxTries: math.MaxInt, Sleep: cfg.RetryWait, Retryable: Retryable}}
	if cfg.JetStream {
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(cfg.AckTimeout),
			jetstream.WithPublishAsyncMaxPending(cfg.Batch))
		if err != nil {
			return nil, fmt.Errorf("fanoutnats: Forward: %w", err)
		}
		f.js = js
		f.idPrefix = randomID()
	}
	w, err := b.Watch(cfg.Watch...)
	if err != nil {
		return nil, err
	}
	f.w = w
	f.ctx, f.cancel = context.WithCancel(context.Background())
	go f.run()
	return f, nil
}

// orDefault returns def for a zero setting, v otherwise.
func orDefault[N int | time.Duration](v, def N) N {
	if v == 0 {
		return def
	}
	return v
}

// setting is a numeric field of a configuration, for [checkSettings]: a
// size with a maximum (limit, the constant named limitName), or a duration
// or count without one (limit 0).
type setting struct {
	name      string
	value     int64
	limit     int64
	limitName string
}

// bounded is the setting of a size field, at most limit.
func bounded(name string, value int, limitName string, limit int) setting {
	return setting{name: name, value: int64(value), limit: int64(limit), limitName: limitName}
}

// checkSettings returns an error naming the first negative setting, or the
// first above its maximum, for the constructor op: a zero field means its
// default, and a negative one, or a size beyond what can be allocated, no
// setting (see "Configuration" in the package doc).
func checkSettings(op string, settings ...setting) error {
	for _, s := range settings {
		if s.value < 0 {
			return fmt.Errorf("fanoutnats: %s: %s is %d; it must be 0 (the default) or more", op, s.name, s.value)
		}
		if s.limit > 0 && s.value > s.limit {
			return fmt.Errorf("fanoutnats: %s: %s is %d; it must be 0 (the default) to %s (%d)", op, s.name, s.value, s.limitName, s.limit)
		}
	}
	return nil
}

// randomID returns 96 random bits in hex, to tell forwarders apart in
// message IDs.
func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand documents it)
	return hex.EncodeToString(b[:])
}

// Close stops the forwarder. It unregisters the watcher at once, so that
// values accepted by the broadcaster from then on are not forwarded, and
// waits until every value the watcher had already taken is published and
// flushed (core NATS: while the client reconnects, values wait in its
// buffer, so Close waits for the server to come back; a flush that fails
// is counted in FlushErrors and reported) or acknowledged (JetStream). If
// ctx ends first, it
// gives up the values left, counts them as abandoned, and returns
// ctx.Err() without waiting further: the goroutine then exits as soon as
// the NATS call in flight returns (see [Forwarder.Done]). Close never
// waits for a dead server longer than ctx allows. It is idempotent. A nil
// ctx is an error: nothing is closed.
func (f *Forwarder[T]) Close(ctx context.Context) error {
	return closeWait(ctx, f.w.Stop, f.done, f.cancel)
}

// Done returns a channel closed when the forwarder's goroutine has exited:
// after Close, after the broadcaster's Shutdown once everything accepted
// was forwarded, after its watcher was evicted, or once the connection
// is closed.
func (f *Forwarder[T]) Done() <-chan struct{} { return f.done }

// Err returns why the forwarder stopped on its own: [fanout.ErrStopped]
// (the broadcaster shut down; everything it accepted before was
// forwarded), [fanout.ErrEvicted] (the watcher's behaviour evicted it), or
// [nats.ErrConnectionClosed] (the values left were counted as failed). It
// is nil while the forwarder runs and after Close.
func (f *Forwarder[T]) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *Forwarder[T]) run() {
	defer close(f.done)
	if f.js != nil {
		defer f.js.CleanupPublisher()
	}
	buf := make([]T, f.cfg.Batch)
	for {
		n, err := f.w.Recv(f.ctx, buf)
		if err != nil {
			f.stop(err, buf)
			return
		}
		f.received.Add(uint64(n))
		if f.js != nil {
			f.sendJetStream(buf[:n])
		} else {
			f.sendCore(buf[:n])
		}
		f.w.Commit() // done with them (WithCommit; nothing otherwise)
		clear(buf[:n])
		if f.nc.IsClosed() {
			f.stop(nats.ErrConnectionClosed, buf)
			return
		}
	}
}

// stop ends the forwarding for reason and accounts for the values still
// queued: abandoned when Close gave up, failed when the connection closed.
// When the queue is done with (Close, the broadcaster's shutdown, an
// eviction), what the client still buffers is flushed (flushLeft).
func (f *Forwarder[T]) stop(reason error, buf []T) {
	switch {
	case errors.Is(reason, fanout.ErrWatcherStopped):
		f.flushLeft() // Close, and the queue is drained
		return
	case f.ctx.Err() != nil:
		reason = nil
		f.discard(buf, &f.abandoned, ErrClosed)
	case errors.Is(reason, nats.ErrConnectionClosed):
		f.discard(buf, &f.failed, reason)
	default:
		f.flushLeft()
	}
	f.mu.Lock()
	f.err = reason
	f.mu.Unlock()
}

// discard stops the watcher and counts what it still holds in n.
func (f *Forwarder[T]) discard(buf []T, n *atomic.Uint64, cause error) {
	f.w.Stop()
	var total uint64
	for {
		k, err := f.w.Recv(context.Background(), buf)
		if err != nil {
			break
		}
		total += uint64(k)
		clear(buf[:k])
	}
	if total > 0 {
		f.received.Add(total)
		n.Add(total)
		f.rep.report(&Error{Op: "publish", Err: fmt.Errorf("%d queued values not published: %w", total, cause)})
	}
}

// prepare returns a value's subject and payload, or counts it as failed.
func (f *Forwarder[T]) prepare(v T) (subject string, data []byte, ok bool) {
	subject = f.cfg.Subject
	if f.cfg.SubjectOf != nil {
		if err := f.callSubject(v, &subject); err != nil {
			f.fail("subject", "", err)
			return "", nil, false
		}
	}
	data, err := f.cfg.Codec.encode(v)
	if err != nil {
		f.fail("encode", subject, err)
		return "", nil, false
	}
	return subject, data, true
}

func (f *Forwarder[T]) callSubject(v T, subject *string) error {
	if perr := guard.Call(func() { *subject = f.cfg.SubjectOf(v) }); perr != nil {
		return fmt.Errorf("%w: SubjectOf panicked: %w", ErrInvalidSubject, perr)
	}
	if !ValidSubject(*subject) {
		return fmt.Errorf("%w: %q", ErrInvalidSubject, *subject)
	}
	return nil
}

func (f *Forwarder[T]) fail(op, subject string, err error) { f.failN(1, op, subject, err) }

// failN counts n values as failed and reports why.
func (f *Forwarder[T]) failN(n int, op, subject string, err error) {
	f.failed.Add(uint64(n))
	if n > 1 {
		err = fmt.Errorf("a frame of %d values: %w", n, err)
	}
	f.rep.report(&Error{Op: op, Subject: subject, Err: err})
}

// sendCore publishes a batch with core NATS and flushes once. A permission
// violation, which the server reports asynchronously, is known after the
// flush: the batch's values to that subject are then counted as failed.
func (f *Forwarder[T]) sendCore(batch []T) {
	before := f.nc.LastError()
	type sent struct{ values, bytes, frames uint64 }
	var bySubject map[string]sent
	f.out = f.pack(batch, f.out[:0])
	for _, m := range f.out {
		var err error
		if m.values > 1 {
			err = f.nc.PublishMsg(m.msg())
		} else {
			err = f.nc.Publish(m.subject, m.data)
		}
		if err != nil {
			f.failN(m.values, "publish", m.subject, err)
			continue
		}
		if bySubject == nil {
			bySubject = make(map[string]sent, 1)
		}
		s := bySubject[m.subject]
		bySubject[m.subject] = sent{s.values + uint64(m.values), s.bytes + uint64(len(m.data)), s.frames + min(uint64(m.values-1), 1)}
	}
	clear(f.out)
	if len(bySubject) == 0 {
		return
	}
	if f.nc.IsConnected() { // while reconnecting, values wait in the client's buffer
		f.flush()
	}
	for subject, n := range bySubject {
		if err := denied(f.nc, before, "Publish", subject); err != nil {
			f.failed.Add(n.values)
			f.rep.report(&Error{Op: "publish", Subject: subject, Err: fmt.Errorf("%d values: %w", n.values, err)})
			continue
		}
		f.published.Add(n.values)
		f.bytes.Add(n.bytes)
		f.frames.Add(n.frames)
	}
}

// flushLeft flushes, as Close ends a core NATS forwarder, what the client
// still holds: values published while it was reconnecting wait in its
// buffer, which sendCore does not flush. It waits for the server to come
// back until Close's context (or FlushTimeout) ends; a flush that fails is
// counted (FlushErrors) and reported, rather than the values being left
// in a buffer that the connection's Close would drop unseen.
func (f *Forwarder[T]) flushLeft() {
	if f.js != nil {
		return
	}
	if n, err := f.nc.Buffered(); err == nil && n == 0 && f.nc.IsConnected() {
		return
	}
	f.flush()
}

func (f *Forwarder[T]) flush() {
	ctx, cancel := context.WithTimeout(f.ctx, f.cfg.FlushTimeout)
	defer cancel()
	f.flushes.Add(1)
	if err := f.nc.FlushWithContext(ctx); err != nil {
		f.flushErrs.Add(1)
		f.rep.report(&Error{Op: "flush", Err: err})
	}
}

// jsPending is a JetStream publish waiting for its ack.
type jsPending struct {
	msg    *nats.Msg
	id     string
	values int
	ids    []string // the MsgID's of its values (with MsgID only)
	fut    jetstream.PubAckFuture
	err    error
}

// sendJetStream publishes a batch asynchronously, then waits for each ack
// in order and retries the publishes that failed.
func (f *Forwarder[T]) sendJetStream(batch []T) {
	before := f.nc.LastError()
	f.out = f.pack(batch, f.out[:0])
	pending := make([]jsPending, 0, len(f.out))
	for _, m := range f.out {
		p := jsPending{msg: m.msg(), id: m.id, values: m.values, ids: f.idsOf(&m)}
		p.fut, p.err = f.js.PublishMsgAsync(p.msg, jetstream.WithMsgID(p.id), jetstream.WithRetryAttempts(0))
		pending = append(pending, p)
	}
	clear(f.out)
	for i := range pending {
		p := &pending[i]
		if p.err == nil {
			p.err = f.await(p)
		}
		if p.err == nil {
			f.confirm(p)
			continue
		}
		if f.ctx.Err() != nil {
			for _, q := range pending[i:] {
				f.abandoned.Add(uint64(q.values))
			}
			return
		}
		f.retry(p, before)
	}
	f.recovered = false
}

// ownID returns a new message ID of the forwarder's own: unique to it and
// to the message.
func (f *Forwarder[T]) ownID() string {
	f.nextID++
	return f.idPrefix + "-" + strconv.FormatUint(f.nextID, 36)
}

// await waits for a publish's ack; a duplicate ack counts as success.
func (f *Forwarder[T]) await(p *jsPending) error {
	select {
	case ack := <-p.fut.Ok():
		if ack.Duplicate {
			f.duplicates.Add(uint64(p.values))
		}
		return nil
	case err := <-p.fut.Err():
		return err
	case <-f.ctx.Done():
		return ErrClosed
	}
}

func (f *Forwarder[T]) confirm(p *jsPending) {
	f.published.Add(uint64(p.values))
	f.bytes.Add(uint64(len(p.msg.Data)))
	if p.values > 1 {
		f.frames.Add(1)
	}
}

// retry publishes p synchronously until the stream acknowledges it, the
// error is not retryable, or Close gives up, pausing as f.policy (the
// core's [fanout.RetryPolicy]) says. A frame refused as too large is
// split instead (see split).
//
// Why this loop is not the core's runner ([fanout.StartBatchSink]): a
// [fanout.BatchSink] reports a prefix of its batch stored and the runner
// writes batch[n:] again. sendJetStream pipelines a batch with
// PublishMsgAsync and its acks come per message: the frame at k may fail
// while those after it are acknowledged. Resending batch[n:] would pack
// it anew (f.pack): other frames, other Nats-Msg-Ids (a frame's ID is its
// first value's plus "+count"), so the stream would store the values
// after k twice. Only p.msg, with its own ID p.id, may be sent again. In
// core NATS mode there is no prefix either: a denied subject is known per
// subject after the flush (denied), for values anywhere in the batch.
func (f *Forwarder[T]) retry(p *jsPending, before error) {
	for tries := 0; ; {
		if err := denied(f.nc, before, "Publish", p.msg.Subject); err != nil {
			p.err = err
		}
		if !f.policy.Retryable(p.err) {
			if p.values > 1 && tooLarge(p.err) {
				f.split(p, before)
				return
			}
			f.failN(p.values, "publish", p.msg.Subject, p.err)
			return
		}
		tries++
		f.retries.Add(1)
		f.rep.report(&Error{Op: "publish", Subject: p.msg.Subject, Err: fmt.Errorf("will retry: %w", p.err)})
		if !f.recovered && !guard.Sleep(f.ctx, f.policy.Pause(tries)) {
			f.abandoned.Add(uint64(p.values))
			return
		}
		f.recovered = false
		if p.err = f.publishSync(p); p.err == nil {
			f.confirm(p)
			f.recovered = true // the values sent with it failed for the same reason
			return
		}
		if f.ctx.Err() != nil {
			f.abandoned.Add(uint64(p.values))
			return
		}
	}
}

// publishSync publishes p and waits for its ack; a duplicate ack counts
// as success.
func (f *Forwarder[T]) publishSync(p *jsPending) error {
	ctx, cancel := context.WithTimeout(f.ctx, f.cfg.AckTimeout)
	defer cancel()
	ack, err := f.js.PublishMsg(ctx, p.msg, jetstream.WithMsgID(p.id), jetstream.WithRetryAttempts(0))
	if err == nil && ack.Duplicate {
		f.duplicates.Add(uint64(p.values))
	}
	return err
}

// tooLarge reports whether err refused a message for its size: above the
// stream's MaxMsgSize, or the server's maximum payload.
func tooLarge(err error) bool {
	return errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum) || errors.Is(err, nats.ErrMaxPayload)
}

// split publishes the two halves of the frame p, refused as too large
// (pack sizes frames by the server's maximum payload, not the stream's
// MaxMsgSize), in order, each as a publish of its own: acknowledged,
// retried, or split again if still too large. A half of one value is a
// plain message, which fails if it is too large. The halves have the IDs
// pack would give them: with MsgID, the same in every process.
func (f *Forwarder[T]) split(p *jsPending, before error) {
	parts, err := splitFrame(strconv.Itoa(p.values), p.msg.Data, nil)
	if err != nil { // cannot happen: pack made the frame
		f.failN(p.values, "publish", p.msg.Subject, err)
		return
	}
	f.splits.Add(1)
	k := len(parts) / 2
	for _, h := range [2]jsPending{f.part(p, parts[:k], 0), f.part(p, parts[k:], k)} {
		if f.ctx.Err() != nil {
			f.abandoned.Add(uint64(h.values))
			continue
		}
		if h.err = f.publishSync(&h); h.err == nil {
			f.confirm(&h)
			continue
		}
		if f.ctx.Err() != nil {
			f.abandoned.Add(uint64(h.values))
			continue
		}
		f.retry(&h, before)
	}
}

// part returns the message of parts, the encoded values of the frame p
// from its value at on: a frame, or a plain message for one value.
func (f *Forwarder[T]) part(p *jsPending, parts [][]byte, at int) jsPending {
	m := outMsg{subject: p.msg.Subject, data: parts[0], values: len(parts)}
	if len(parts) > 1 {
		m.data = nil
		for _, d := range parts {
			m.data = appendFramePart(m.data, d)
		}
	}
	h := jsPending{msg: m.msg(), values: m.values}
	if p.ids == nil {
		h.id = f.ownID()
	} else {
		h.ids = p.ids[at : at+len(parts)]
		h.id = frameID(h.ids)
	}
	return h
}

// ForwarderStats is a snapshot of a [Forwarder]'s counters. Every value the
// forwarder took from its watcher (Received) ends as exactly one of
// Published, Failed or Abandoned, or is still being published; the values
// its watcher missed, by reason, are in Watcher.
type ForwarderStats struct {
	// Received counts values taken from the watcher's queue.
	Received uint64
	// Published counts values handed to NATS. For core NATS: accepted by
	// the client (in its buffer for the server) and not denied by the
	// server. The forwarder then flushes the batch if the connection is
	// up; a flush that fails (FlushErrors, reported) does not take them
	// back, since the client still holds them and sends them when it can,
	// or loses them if the connection closes: NATS cannot tell which. In
	// JetStream mode: acknowledged by the stream.
	Published uint64
	// Failed counts values that were not published: their subject or
	// encoding failed, the client refused them (payload too large, closed
	// connection, ...), the server denied the subject, or (JetStream) the
	// error was not retryable.
	Failed uint64
	// Abandoned counts values given up because Close's context ended.
	Abandoned uint64
	// Retries counts JetStream publishes tried again.
	Retries uint64
	// Duplicates counts values whose JetStream ack reported a duplicate: a
	// retry of a value the stream had already stored, stored once.
	Duplicates uint64
	// Frames counts the frames published (messages of several values,
	// see ForwardConfig.Frame), included in Published as their values.
	Frames uint64
	// Splits counts the frames refused as too large by a JetStream stream
	// (its MaxMsgSize) and published again in two halves (see
	// ForwardConfig.Frame).
	Splits uint64
	// Flushes and FlushErrors count core NATS flushes, one per batch, and
	// those that failed (time-out, closed connection); the values of a
	// batch whose flush failed are counted in Published all the same.
	Flushes, FlushErrors uint64
	// Bytes counts the payload bytes of the published values.
	Bytes uint64
	// CallbackPanics counts panics of OnError and the logger, contained.
	CallbackPanics uint64
	// Watcher holds the forwarder's watcher's counters: values queued and
	// the values it missed, by [fanout.DropReason].
	Watcher fanout.WatcherStats
}

// Stats returns the forwarder's counters. They stay readable after Close.
func (f *Forwarder[T]) Stats() ForwarderStats {
	return ForwarderStats{
		Received:       f.received.Load(),
		Published:      f.published.Load(),
		Failed:         f.failed.Load(),
		Abandoned:      f.abandoned.Load(),
		Retries:        f.retries.Load(),
		Duplicates:     f.duplicates.Load(),
		Frames:         f.frames.Load(),
		Splits:         f.splits.Load(),
		Flushes:        f.flushes.Load(),
		FlushErrors:    f.flushErrs.Load(),
		Bytes:          f.bytes.Load(),
		CallbackPanics: f.rep.panics.Load(),
		Watcher:        f.w.Stats(),
	}
}

// Metrics returns the forwarder's counters as Prometheus samples: those of
// [ForwarderStats.Metrics], read at each call. It makes the forwarder a
// [fanout.MetricSource].
func (f *Forwarder[T]) Metrics() []fanout.Metric { return f.Stats().Metrics() }

// Metrics returns the statistics as Prometheus samples:
// fanoutnats_forwarder_values_total{result=received|published|failed|abandoned},
// fanoutnats_forwarder_dropped_total{reason=full|oldest|timeout|evicted|panic},
// fanoutnats_forwarder_retries_total, _duplicates_total, _frames_total,
// _frame_splits_total, _flushes_total, _flush_errors_total, _bytes_total,
// _callback_panics_total and the gauge fanoutnats_forwarder_queued.
func (s ForwarderStats) Metrics() []fanout.Metric {
	const values, dropped = "fanoutnats_forwarder_values_total", "fanoutnats_forwarder_dropped_total"
	const vHelp = "Values taken from the local watcher, by outcome."
	const dHelp = "Values the forwarder's local watcher missed, by reason."
	return []fanout.Metric{
		counter(values, vHelp, s.Received, label("result", "received")),
		counter(values, vHelp, s.Published, label("result", "published")),
		counter(values, vHelp, s.Failed, label("result", "failed")),
		counter(values, vHelp, s.Abandoned, label("result", "abandoned")),
		counter(dropped, dHelp, s.Watcher.DroppedFull, label("reason", "full")),
		counter(dropped, dHelp, s.Watcher.DroppedOldest, label("reason", "oldest")),
		counter(dropped, dHelp, s.Watcher.DroppedTimeout, label("reason", "timeout")),
		counter(dropped, dHelp, s.Watcher.DroppedEvicted, label("reason", "evicted")),
		counter(dropped, dHelp, s.Watcher.DroppedPanic, label("reason", "panic")),
		counter("fanoutnats_forwarder_retries_total", "JetStream publishes tried again.", s.Retries),
		counter("fanoutnats_forwarder_duplicates_total", "Values whose JetStream ack reported a duplicate.", s.Duplicates),
		counter("fanoutnats_forwarder_frames_total", "Frames (messages of several values) published.", s.Frames),
		counter("fanoutnats_forwarder_frame_splits_total", "Frames a JetStream stream refused as too large, published again in halves.", s.Splits),
		counter("fanoutnats_forwarder_flushes_total", "Core NATS flushes.", s.Flushes),
		counter("fanoutnats_forwarder_flush_errors_total", "Core NATS flushes that failed.", s.FlushErrors),
		counter("fanoutnats_forwarder_bytes_total", "Payload bytes published.", s.Bytes),
		counter("fanoutnats_forwarder_callback_panics_total", "Panics of OnError or the logger, contained.", s.CallbackPanics),
		gauge("fanoutnats_forwarder_queued", "Values waiting in the local watcher's queue.", float64(s.Watcher.Queued)),
	}
}
