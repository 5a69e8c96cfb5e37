package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultRecorderQueueLength is the queue capacity of a [Recorder]'s runners
// when [WithQueueLength] is not given: client-go's 1000.
const DefaultRecorderQueueLength = 1000

// ErrDropped is returned by [Recorder.Record] when the value was refused
// because a watcher that waits when full (see [Recorder.Watch]) was full. No
// watcher got the value; it is counted as [DropRefused].
var ErrDropped = errors.New("fanout: value dropped: a waiting watcher is full")

// Sink stores values for a [Recorder] runner (see [Recorder.StartSink]). The
// runner calls Create for a value seen for the first time and Update for a
// repeat (a [Correlation] with Count > 1), and passes what they return to the
// correlator's [Correlator.Observe]; a sink that stores nothing new may return
// v itself. ctx is cancelled only when [Recorder.Shutdown]'s context ends
// before the runners have finished.
type Sink[T any] interface {
	Create(ctx context.Context, v T) (T, error)
	Update(ctx context.Context, v T) (T, error)
}

// RetryPolicy says how a sink runner retries a failed write.
type RetryPolicy struct {
	// MaxTries is the number of attempts per value, at least 1.
	MaxTries int
	// Sleep is the pause between attempts.
	Sleep time.Duration
	// Jitter adds a random extra of up to Jitter×Sleep to each pause; it
	// must be finite. A pause longer than the longest Duration is cut to it.
	Jitter float64
	// RandomFirst makes the first pause random in [0, Sleep), so that many
	// clients failing together do not retry together.
	RandomFirst bool
	// Retryable reports whether an error is worth retrying; a value whose
	// write fails with an error it rejects is dropped as [DropRejected].
	// Nil retries every error.
	Retryable func(error) bool
}

// DefaultRetryPolicy returns client-go tools/record's policy: 12 tries, 10 s
// apart, the first pause random, every error retried.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxTries: 12, Sleep: 10 * time.Second, RandomFirst: true}
}

func (p RetryPolicy) validate() error {
	if p.MaxTries < 1 || p.Sleep < 0 || !(p.Jitter >= 0 && p.Jitter <= math.MaxFloat64) {
		return fmt.Errorf("fanout: invalid RetryPolicy: MaxTries %d must be at least 1, Sleep %v and Jitter %v must not be negative", p.MaxTries, p.Sleep, p.Jitter)
	}
	return nil
}

// pause returns the sleep before attempt tries+1, after tries failures,
// saturating at the longest Duration.
func (p RetryPolicy) pause(tries int) time.Duration {
	d := float64(p.Sleep)
	if tries == 1 && p.RandomFirst {
		d *= rand.Float64()
	}
	if p.Jitter > 0 {
		d += p.Jitter * float64(p.Sleep) * rand.Float64()
	}
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// Recorder publishes values into its own [Broadcaster] without ever blocking
// the caller, and runs consumers of them: sinks with a correlator and
// retries ([Recorder.StartSink]) and handlers ([Recorder.StartHandler],
// [Recorder.StartSlog]), each on one goroutine of its own. Every value that
// does not reach a runner's sink or handler is counted by [DropReason] (see
// [Recorder.Stats]) and reported to [WithDropHandler] and [WithLogger].
// [Recorder.Flush] waits until the runners have dealt with everything
// recorded before it.
//
// A runner's queue holds up to [DefaultRecorderQueueLength] values (see
// [WithQueueLength]); a value that meets a full queue is dropped for that
// runner only ([DropFull]), so a slow or failing sink never holds up the
// caller or the other runners.
type Recorder[T any] struct {
	b      *Broadcaster[T]
	queue  int
	clock  Clock
	stamp  func(T, time.Time) T
	retry  RetryPolicy
	logger *slog.Logger
	onDrop func(Drop)

	// ctx ends retry sleeps: cancelled by Shutdown. sinkCtx is passed to
	// sinks: cancelled when Shutdown's context ends first.
	ctx, sinkCtx       context.Context
	cancel, sinkCancel context.CancelFunc

	// mu guards the runners and orders their start with Shutdown.
	mu       sync.Mutex
	stopped  bool
	runners  []*Runner[T]
	recorded atomic.Uint64
	refused  atomic.Uint64
	// exited accumulates the counters of runners that have exited.
	exited RunnerStats
}

// NewRecorder returns a recorder with its own broadcaster. It takes
// [WithQueueLength] (the runners' queues), [WithClock], [WithStamp],
// [WithRetry], [WithDropHandler] and [WithLogger]. It returns an error for a
// negative queue length, an invalid retry policy, or a stamp hook for another
// type.
func NewRecorder[T any](opts ...RecorderOption) (*Recorder[T], error) {
	cfg := recorderConfig{queueLen: DefaultRecorderQueueLength}
	for _, o := range opts {
		if o != nil {
			o.applyRecorder(&cfg)
		}
	}
	if err := (config{queueLen: cfg.queueLen}).validate(); err != nil {
		return nil, err
	}
	r := &Recorder[T]{
		b:      New[T](WithQueueLength(cfg.queueLen), WithFullChannelBehavior(DropIfChannelFull)),
		queue:  cfg.queueLen,
		clock:  cfg.clock,
		retry:  DefaultRetryPolicy(),
		logger: cfg.logger,
		onDrop: cfg.onDrop,
	}
	if r.clock == nil {
		r.clock = systemClock{}
	}
	if cfg.retry != nil {
		if err := cfg.retry.validate(); err != nil {
			return nil, err
		}
		r.retry = *cfg.retry
	}
	if cfg.stamp != nil {
		f, ok := cfg.stamp.(func(T, time.Time) T)
		if !ok {
			var v T
			return nil, fmt.Errorf("fanout: WithStamp hook is a %T, want a func(%T, time.Time) %[2]T", cfg.stamp, v)
		}
		r.stamp = f
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.sinkCtx, r.sinkCancel = context.WithCancel(context.Background())
	return r, nil
}

// Record stamps v (see [WithStamp]) and publishes it to every runner and
// watcher. It never blocks on a consumer. It returns nil when v was accepted;
// a runner whose queue is full misses it, counted as [DropFull]. It returns
// [ErrDropped] when a watcher that waits when full was full (see
// [Recorder.Watch]), and [ErrStopped] after Shutdown. A panic in the stamp
// hook or the clock reaches the caller, before anything is recorded.
func (r *Recorder[T]) Record(v T) error {
	vs := [1]T{v}
	_, err := r.RecordBatch(vs[:])
	return err
}

// RecordBatch records the values of vs in order, like that many calls of
// [Recorder.Record] but contiguously and at the cost of one publish (see
// [Broadcaster.ActionBatch]). With a stamp hook, the values of vs are
// stamped in place. It returns how many were accepted (the first n of vs)
// and, if not all, [ErrDropped] or [ErrStopped] as Record does.
func (r *Recorder[T]) RecordBatch(vs []T) (int, error) {
	if r.stamp != nil && len(vs) > 0 {
		now := r.clock.Now()
		for i := range vs {
			vs[i] = r.stamp(vs[i], now)
		}
	}
	n, err := r.b.publish(context.Background(), vs, pubTry)
	r.recorded.Add(uint64(n))
	if errors.Is(err, errRefused) {
		r.refused.Add(uint64(len(vs) - n))
		for range len(vs) - n {
			r.report(Drop{Reason: DropRefused}, nil)
		}
		return n, ErrDropped
	}
	return n, err
}

// report hands a drop to the drop handler and the logger. A panic in either
// is contained: the drop is already counted.
func (r *Recorder[T]) report(d Drop, runner *Runner[T]) {
	if r.onDrop == nil && r.logger == nil {
		return
	}
	_ = safeCall(func() { r.reportUnsafe(d, runner) })
}

func (r *Recorder[T]) reportUnsafe(d Drop, runner *Runner[T]) {
	if r.onDrop != nil {
		r.onDrop(d)
	}
	if r.logger != nil {
		attrs := []slog.Attr{slog.String("reason", d.Reason.String()), slog.Uint64("watcher", d.WatcherID)}
		if runner != nil {
			attrs = append(attrs, slog.String("runner", runner.name))
		}
		if d.Err != nil {
			attrs = append(attrs, slog.String("err", d.Err.Error()))
		}
		r.logger.LogAttrs(context.Background(), slog.LevelWarn, "fanout: value dropped", attrs...)
	}
}

// Watch registers a plain watcher of the recorded values, as
// [Broadcaster.Watch] does. Like a runner's, its queue holds the recorder's
// queue length and drops new values when full, unless opts say otherwise.
// With [WaitIfChannelFull] (or another behaviour that waits), Record refuses
// values with [ErrDropped] while its queue is full, for every runner and
// watcher; with queue length 0 (hand-off), since Record never waits, the
// watcher misses each value its reader is not already waiting for. A plain
// watcher's drops are counted in its own [Watcher.Stats], not in
// [Recorder.Stats]. [Recorder.Flush] does not wait for plain watchers.
func (r *Recorder[T]) Watch(opts ...Option) (*Watcher[T], error) {
	return r.b.Watch(opts...)
}

// StartSink starts a runner that writes every recorded value to sink: it
// passes the value through c (usually a [*Correlator]; nil: no correlation,
// every value is created), skips what the spam filter rejects and what c
// merged into an earlier record, and calls Create or Update with retries
// per the recorder's [RetryPolicy]. The runner's goroutine makes one write
// at a time; a failing sink delays only its own queue. If c implements
// [LossReporting], the runner counts the merged values c reports lost
// later, and the writes c reports failed, as its own; StartSink returns
// the error c's ReportLossesTo returns (a merging [Correlator] serves one
// runner only).
func (r *Recorder[T]) StartSink(sink Sink[T], c SinkCorrelator[T]) (*Runner[T], error) {
	if sink == nil {
		return nil, errors.New("fanout: StartSink: sink is nil")
	}
	if cc, ok := c.(*Correlator[T]); ok && cc == nil {
		c = nil // a typed nil means no correlation, as an untyped one does
	}
	var attach func(*Runner[T]) error
	if lr, ok := c.(LossReporting); ok {
		attach = func(run *Runner[T]) error { return lr.ReportLossesTo(runnerLosses[T]{run}) }
	}
	return r.start(fmt.Sprintf("sink %T", sink), attach, func(run *Runner[T], v T) {
		run.write(sink, c, v)
	})
}

// StartHandler starts a runner that calls f with every recorded value, in
// order, on the runner's goroutine.
func (r *Recorder[T]) StartHandler(f func(T)) (*Runner[T], error) {
	if f == nil {
		return nil, errors.New("fanout: StartHandler: handler is nil")
	}
	return r.start("handler", nil, func(run *Runner[T], v T) {
		if err := safeCall(func() { f(v) }); err != nil {
			run.drop(DropRejected, err)
			return
		}
		run.written.Add(1)
	})
}

// StartSlog starts a runner that logs every recorded value to l at level,
// with message msg and the attributes attrs returns (nil: one attribute
// "value" holding the value).
func (r *Recorder[T]) StartSlog(l *slog.Logger, level slog.Level, msg string, attrs func(T) []slog.Attr) (*Runner[T], error) {
	if l == nil {
		return nil, errors.New("fanout: StartSlog: logger is nil")
	}
	if attrs == nil {
		attrs = func(v T) []slog.Attr { return []slog.Attr{slog.Any("value", v)} }
	}
	return r.StartHandler(func(v T) { l.LogAttrs(context.Background(), level, msg, attrs(v)...) })
}

// start starts a runner that handles each value with handle; attach, if
// set, is called first, and its error returned.
func (r *Recorder[T]) start(name string, attach func(*Runner[T]) error, handle func(*Runner[T], T)) (*Runner[T], error) {
	run := &Runner[T]{r: r, name: name, handle: handle, done: make(chan struct{})}
	run.ctx, run.cancel = context.WithCancel(r.ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		run.cancel()
		return nil, ErrStopped
	}
	if attach != nil {
		if err := attach(run); err != nil {
			run.cancel()
			return nil, err
		}
	}
	var opts []Option
	if r.onDrop != nil || r.logger != nil {
		// A handler makes the runner's drops be settled per value, so
		// that each is reported as it happens; without one they cost
		// Record nothing.
		opts = append(opts, WithDropHandler(func(d Drop) { r.report(d, run) }))
	}
	w, err := r.b.Watch(opts...)
	if err != nil {
		run.cancel()
		return nil, err
	}
	run.w = w
	r.runners = append(r.runners, run)
	go run.loop()
	return run, nil
}

// Flush waits until every runner has written, skipped or dropped every value
// recorded before the call, or until ctx ends, and then returns ctx.Err().
// A runner that has exited counts as done. Flush does not wait for plain
// watchers (see [Recorder.Watch]). Called from a sink or handler, it waits
// for its own runner, which cannot progress: give it a context that ends.
// A nil ctx means context.Background(), as everywhere in this package.
func (r *Recorder[T]) Flush(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	type mark struct {
		run    *Runner[T]
		target uint64
	}
	r.mu.Lock()
	marks := make([]mark, len(r.runners))
	for i, run := range r.runners {
		marks[i] = mark{run, run.w.backlog()}
	}
	r.mu.Unlock()
	for _, m := range marks {
		if err := m.run.waitHandled(ctx, m.target); err != nil {
			return err
		}
	}
	return nil
}

// Shutdown stops the recorder and its runners. It is idempotent and safe
// from any goroutine. From its start, Record, Watch and the Start methods
// return [ErrStopped], and no write is retried: each value already recorded,
// and the one in flight, gets at most one more attempt. Shutdown waits until
// every runner has finished its queue and exited, and returns nil; or, if ctx
// ends first, it cancels the context passed to sinks, has the runners drop
// what is still queued as [DropShutdown], and returns ctx.Err() at once. The
// runners then exit as soon as their calls in flight return ([Runner.Done]);
// a second Shutdown waits for that. Call [Recorder.Flush] first to wait for
// retries to play out.
//
// Called from a sink or handler, Shutdown waits for that very runner, so
// give it a context that ends. A nil ctx means context.Background().
func (r *Recorder[T]) Shutdown(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	r.mu.Lock()
	r.stopped = true
	runners := slices.Clone(r.runners)
	r.mu.Unlock()
	r.cancel()
	r.b.Shutdown()
	var err error
	for _, run := range runners {
		select {
		case <-run.done:
			continue
		case <-ctx.Done():
		}
		err = ctx.Err()
		for _, run := range runners {
			run.abandon.Store(true)
		}
		r.sinkCancel()
		break
	}
	return err
}

// Stats returns the recorder's counters: totals over every runner it has
// started, including those that have exited.
func (r *Recorder[T]) Stats() RecorderStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := RecorderStats{Recorded: r.recorded.Load(), Refused: r.refused.Load(), Runners: len(r.runners), RunnerStats: r.exited}
	for _, run := range r.runners {
		s.RunnerStats.add(run.Stats())
	}
	s.Dropped += s.Refused
	return s
}

// RecorderStats is a snapshot of a [Recorder]'s counters.
type RecorderStats struct {
	// Recorded counts values Record accepted.
	Recorded uint64
	// Refused counts values Record refused ([DropRefused]).
	Refused uint64
	// Runners is the number of runners still running.
	Runners int
	// RunnerStats holds totals over all runners; its Dropped also
	// includes Refused.
	RunnerStats
}

// RunnerStats is a snapshot of a [Runner]'s counters.
type RunnerStats struct {
	// Queued is the number of values waiting in the runner's queue.
	Queued int
	// Received counts values taken from the queue.
	Received uint64
	// Written counts values the sink stored or the handler took.
	Written uint64
	// Failures counts failed write attempts, retried or not, including
	// those the correlator reports ([LossReporter].Failed).
	Failures uint64
	// Dropped counts values not written, all reasons together.
	Dropped uint64
	// DroppedFull counts values missed because the queue was full, and
	// merged values whose record the correlator's full cache evicted.
	DroppedFull uint64
	// Merged counts values the correlator folded into an earlier record
	// (see [Correlation].Merged); they are not drops. Those it reports
	// lost later (see [LossReporter]) move to a Dropped counter.
	Merged uint64
	// DroppedSpam counts values the spam filter skipped.
	DroppedSpam uint64
	// DroppedRejected counts values whose error was not retryable, or whose
	// sink or handler panicked.
	DroppedRejected uint64
	// DroppedRetries counts values that failed every try.
	DroppedRetries uint64
	// DroppedShutdown counts values given up at shutdown.
	DroppedShutdown uint64
}

func (s *RunnerStats) add(o RunnerStats) {
	s.Queued += o.Queued
	s.Received += o.Received
	s.Written += o.Written
	s.Failures += o.Failures
	s.Dropped += o.Dropped
	s.DroppedFull += o.DroppedFull
	s.Merged += o.Merged
	s.DroppedSpam += o.DroppedSpam
	s.DroppedRejected += o.DroppedRejected
	s.DroppedRetries += o.DroppedRetries
	s.DroppedShutdown += o.DroppedShutdown
}

// Runner is a consumer started by a [Recorder]: one goroutine that takes the
// recorded values from its own queue, in order, and hands each to a sink or
// a handler.
type Runner[T any] struct {
	r      *Recorder[T]
	w      *Watcher[T]
	name   string
	handle func(*Runner[T], T)
	// ctx ends retry sleeps: cancelled by Stop and by the recorder's
	// Shutdown.
	ctx     context.Context
	cancel  context.CancelFunc
	abandon atomic.Bool
	done    chan struct{}

	received, written, failures, merged atomic.Uint64
	drops                               [numDropReasons]atomic.Uint64

	mu      sync.Mutex
	handled uint64 // values written, skipped or dropped after receipt
	waiters []flushWaiter

	// exited is set, under the recorder's mu, when the runner's counters
	// have moved to the recorder's: later losses go there.
	exited bool
}

type flushWaiter struct {
	target uint64
	ch     chan struct{}
}

// Stop stops the runner: it takes no new values, gives each value still
// queued (and the one in flight) at most one more attempt, without retries,
// and exits. Stop does not wait; see [Runner.Done]. It is idempotent.
func (run *Runner[T]) Stop() {
	run.cancel()
	run.w.Stop()
}

// Done returns a channel that is closed when the runner's goroutine has
// exited.
func (run *Runner[T]) Done() <-chan struct{} { return run.done }

// Stats returns the runner's counters.
func (run *Runner[T]) Stats() RunnerStats {
	ws := run.w.Stats()
	s := RunnerStats{
		Queued:          ws.Queued,
		Received:        run.received.Load(),
		Written:         run.written.Load(),
		Failures:        run.failures.Load(),
		Merged:          run.merged.Load(),
		DroppedFull:     ws.DroppedFull + run.drops[DropFull].Load(),
		DroppedSpam:     run.drops[DropSpam].Load(),
		DroppedRejected: run.drops[DropRejected].Load(),
		DroppedRetries:  run.drops[DropRetries].Load(),
		DroppedShutdown: run.drops[DropShutdown].Load(),
	}
	s.Dropped = s.DroppedFull + s.DroppedSpam + s.DroppedRejected + s.DroppedRetries + s.DroppedShutdown
	return s
}

func (run *Runner[T]) loop() {
	defer run.exit()
	buf := make([]T, 1) // one at a time: the queue length stays exact
	for {
		n, err := run.w.Recv(context.Background(), buf)
		if err != nil {
			return
		}
		for _, v := range buf[:n] {
			run.received.Add(1)
			if run.abandon.Load() {
				run.drop(DropShutdown, nil)
			} else {
				run.handle(run, v)
			}
			run.markHandled()
		}
		clear(buf)
	}
}

func (run *Runner[T]) exit() {
	run.cancel()
	r := run.r
	r.mu.Lock()
	if i := slices.Index(r.runners, run); i >= 0 {
		r.runners = slices.Delete(r.runners, i, i+1)
	}
	st := run.Stats()
	st.Queued = 0
	r.exited.add(st)
	run.exited = true
	r.mu.Unlock()
	run.mu.Lock()
	for _, fw := range run.waiters {
		close(fw.ch)
	}
	run.waiters = nil
	close(run.done) // under run.mu: waitHandled sees either this or adds a waiter closed above
	run.mu.Unlock()
}

func (run *Runner[T]) markHandled() {
	run.mu.Lock()
	run.handled++
	if len(run.waiters) > 0 {
		keep := run.waiters[:0]
		for _, fw := range run.waiters {
			if fw.target <= run.handled {
				close(fw.ch)
			} else {
				keep = append(keep, fw)
			}
		}
		run.waiters = keep
	}
	run.mu.Unlock()
}

// waitHandled waits until the runner has handled target values or exited.
func (run *Runner[T]) waitHandled(ctx context.Context, target uint64) error {
	run.mu.Lock()
	if run.handled >= target {
		run.mu.Unlock()
		return nil
	}
	select {
	case <-run.done:
		run.mu.Unlock()
		return nil
	default:
	}
	ch := make(chan struct{})
	run.waiters = append(run.waiters, flushWaiter{target, ch})
	run.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	run.mu.Lock()
	run.waiters = slices.DeleteFunc(run.waiters, func(fw flushWaiter) bool { return fw.ch == ch })
	run.mu.Unlock()
	return ctx.Err()
}

func (run *Runner[T]) drop(reason DropReason, err error) {
	run.drops[reason].Add(1)
	run.r.report(Drop{WatcherID: run.w.ID(), Reason: reason, Err: err}, run)
}

// write correlates v and writes it to sink, retrying per the policy. It
// mirrors client-go's recordToSink: after a failure the tries are counted
// first, then a pause that Stop or Shutdown cut short ends the value.
func (run *Runner[T]) write(sink Sink[T], c SinkCorrelator[T], v T) {
	res, ok := run.correlate(c, v)
	if !ok {
		return
	}
	p := run.r.retry
	for tries := 1; ; tries++ {
		stored, err, perr := run.attempt(sink, res)
		switch {
		case perr != nil:
			run.failures.Add(1)
			run.drop(DropRejected, perr)
			return
		case err == nil:
			run.written.Add(1)
			if c != nil {
				// The value is stored; a correlator function that panics
				// here only loses the repeat's reference.
				_ = safeCall(func() { c.Observe(stored) })
			}
			return
		}
		run.failures.Add(1)
		if reason, why, stop := run.giveUp(p, err, tries); stop {
			run.drop(reason, why)
			return
		}
		if !run.pause(p, tries) {
			run.drop(DropShutdown, err)
			return
		}
	}
}

// correlate passes v through c and reports whether there is a value to
// write: not when the spam filter skipped it, c merged it, or c panicked.
func (run *Runner[T]) correlate(c SinkCorrelator[T], v T) (Correlation[T], bool) {
	res := Correlation[T]{Value: v, Count: 1}
	if c != nil {
		if err := safeCall(func() { res = c.Correlate(v) }); err != nil {
			run.drop(DropRejected, err)
			return res, false
		}
	}
	switch {
	case res.Skip:
		run.drop(DropSpam, nil)
		return res, false
	case res.Merged:
		run.merged.Add(1)
		return res, false
	}
	return res, true
}

// giveUp decides, after the write failure number tries, whether to stop
// retrying, why, and the error to report: the policy does not retry err (or
// its classifier panicked), the tries are used up, or the runner is
// stopping.
func (run *Runner[T]) giveUp(p RetryPolicy, err error, tries int) (DropReason, error, bool) {
	retry := true
	if p.Retryable != nil {
		if perr := safeCall(func() { retry = p.Retryable(err) }); perr != nil {
			return DropRejected, perr, true
		}
	}
	switch {
	case !retry:
		return DropRejected, err, true
	case tries >= p.MaxTries:
		return DropRetries, err, true
	case run.ctx.Err() != nil:
		return DropShutdown, err, true
	}
	return 0, nil, false
}

// pause sleeps before the next try; it reports false if Stop or Shutdown
// cut it short.
func (run *Runner[T]) pause(p RetryPolicy, tries int) bool {
	t := time.NewTimer(p.pause(tries))
	defer t.Stop()
	select {
	case <-run.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// attempt makes one write: Update for a repeat, Create otherwise. perr
// reports a panic in the sink.
func (run *Runner[T]) attempt(sink Sink[T], res Correlation[T]) (stored T, err, perr error) {
	perr = safeCall(func() {
		if res.Count > 1 {
			stored, err = sink.Update(run.r.sinkCtx, res.Value)
		} else {
			stored, err = sink.Create(run.r.sinkCtx, res.Value)
		}
	})
	return stored, err, perr
}

// safeCall runs f and turns a panic into an error, so that a panicking sink,
// handler or correlator function drops one value instead of the process.
func safeCall(f func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("fanout: panic: %v", p)
		}
	}()
	f()
	return nil
}
