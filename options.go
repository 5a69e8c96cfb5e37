package fanout

import (
	"fmt"
	"log/slog"
	"time"
)

// DefaultQueueLength is the per-watcher queue capacity used when
// [WithQueueLength] is not given. Pull readers share the broadcaster's
// ring (twice the longest queue), so a long queue costs them nothing per
// watcher; it lets a lossless publisher run that much further ahead of its
// slowest reader before it waits, and readers that do any work then take
// long batches rather than parking and being woken every few values.
// It was 100 until v0.1.0. With readers checking the order of their
// values, one publisher, 1024 made N=10 1.2-2.2x, N=100 2.2-6x and N=1000
// 6x the deliveries/s of 100, N=1 the same (BenchmarkWorkingReaders, 3
// runs); in the harness's working group, 1.6-2.2x at N=10, 2.5-4x at
// N=100, 5-7x at N=1000. What it costs: a watcher moved to a channel
// ([Watcher.ResultChan]) has a channel of 1024 values (8 KiB of pointers);
// a lossy watcher drops only 1024 values behind; a lossless publisher
// waits only 1024 behind; each broadcaster's ring holds 2048 values. Set
// WithQueueLength(100) for the old behaviour; k8s's watch.Broadcaster has
// no default (the fanout k8s packages set client-go's lengths).
const DefaultQueueLength = 1024

// MaxQueueLength is the largest queue capacity [WithQueueLength] accepts
// (16,777,216 values).
const MaxQueueLength = 1 << 24

// MaxHistory is the largest history [WithHistory] accepts (16,777,216
// values).
const MaxHistory = 1 << 24

// The option types. A broadcaster and its watchers share [Option]; a
// recorder has its own [RecorderOption], so that an option given to the
// wrong one is a compile error:
//
//	option                      New  Watch  NewRecorder  type
//	--------------------------  ---  -----  -----------  ------------
//	WithQueueLength             yes  yes    yes          CommonOption
//	WithDropHandler             yes  yes    yes          CommonOption
//	WithFullChannelBehavior     yes  yes    -            Option
//	WithReplay                  yes  yes    -            Option
//	WithHistory                 yes  error  -            Option
//	WithClock, WithRetry,       -    -      yes          RecorderOption
//	WithLogger, WithStamp
type (
	// Option configures a [Broadcaster] when passed to [New], where it
	// sets the default for every watcher, or a single watcher when passed
	// to [Broadcaster.Watch], [Broadcaster.WatchWithPrefix] or
	// [Recorder.Watch], where it overrides that default.
	Option interface {
		applyOption(*config)
	}

	// RecorderOption configures a [Recorder] when passed to [NewRecorder].
	RecorderOption interface {
		applyRecorder(*recorderConfig)
	}

	// CommonOption is an [Option] that also configures a [Recorder]:
	// [WithQueueLength] and [WithDropHandler].
	CommonOption interface {
		Option
		RecorderOption
	}
)

// config holds a broadcaster's settings and the defaults of its watchers;
// Watch copies it and applies its own options on top.
type config struct {
	queueLen int
	behavior FullChannelBehavior
	onDrop   func(Drop)
	replay   int
	history  int
	commit   bool
	filter   any // func(T) bool, checked by Watch and New
	name     string
	// waitAfter and waitReport: WithWaitReport.
	waitAfter  time.Duration
	waitReport func(WaitReport)

	// newOnly names the option of New's that was applied, if any: an
	// error for a watcher.
	newOnly string
	// extra: the watcher gets its watcherExtra when it is made (see
	// withExtra).
	extra bool
}

// withExtra is the internal option with which Topics registers its
// watchers: they get their watcherExtra before they are shared, so that
// Topics can set its fields (onStop, evicted) after Watch returns without
// writing w.x, which publishers read.
type withExtra struct{}

func (withExtra) applyOption(c *config) { c.extra = true }

func defaultConfig() config {
	return config{queueLen: DefaultQueueLength, behavior: WaitIfChannelFull}
}

func (c config) with(opts []Option) config {
	c.newOnly = ""
	for _, o := range opts {
		if o != nil {
			o.applyOption(&c)
		}
	}
	return c
}

// validate reports the first invalid setting.
func (c config) validate() error {
	if c.queueLen < 0 || c.queueLen > MaxQueueLength {
		return fmt.Errorf("fanout: invalid queue length %d: must be 0 (hand-off) to MaxQueueLength (%d)", c.queueLen, MaxQueueLength)
	}
	if c.history < 0 || c.history > MaxHistory {
		return fmt.Errorf("fanout: invalid history %d: must be 0 (none) to MaxHistory (%d)", c.history, MaxHistory)
	}
	if c.newOnly != "" {
		return fmt.Errorf("fanout: %s applies to New, not to Watch", c.newOnly)
	}
	if c.waitReport != nil && c.waitAfter <= 0 {
		return fmt.Errorf("fanout: WithWaitReport: the threshold %v must be positive", c.waitAfter)
	}
	if c.replay < 0 || c.replay > c.history {
		return fmt.Errorf("fanout: invalid replay %d: must be 0 to the broadcaster's history (%d, see WithHistory)", c.replay, c.history)
	}
	return nil
}

// recorderConfig holds a recorder's settings.
type recorderConfig struct {
	queueLen int
	onDrop   func(Drop)
	clock    Clock
	retry    *RetryPolicy
	logger   *slog.Logger
	stamp    any // func(T, time.Time) T, checked by NewRecorder[T]
}

type queueLengthOption int

func (o queueLengthOption) applyOption(c *config)           { c.queueLen = int(o) }
func (o queueLengthOption) applyRecorder(c *recorderConfig) { c.queueLen = int(o) }

// WithQueueLength sets the watcher queue capacity: exactly n values may be
// waiting for a watcher's consumer. The default is [DefaultQueueLength] (1024)
// for a broadcaster's watchers and [DefaultRecorderQueueLength] (1000) for a
// recorder's runners. Zero means hand-off: a value is given to the consumer
// directly and nothing is queued. A negative n, or one above
// [MaxQueueLength], is an error: [NewRecorder] and Watch return it, and
// passed to [New] it is returned by every method of the broadcaster that
// returns an error, Action included.
func WithQueueLength(n int) CommonOption { return queueLengthOption(n) }

type behaviorOption struct{ b FullChannelBehavior }

func (o behaviorOption) applyOption(c *config) {
	c.behavior = o.b
	if c.behavior == nil {
		c.behavior = WaitIfChannelFull
	}
}

// WithFullChannelBehavior sets what happens when a value meets a full watcher
// queue. The default is [WaitIfChannelFull]; nil restores the default.
func WithFullChannelBehavior(b FullChannelBehavior) Option { return behaviorOption{b} }

type dropHandlerOption func(Drop)

func (o dropHandlerOption) applyOption(c *config)           { c.onDrop = o }
func (o dropHandlerOption) applyRecorder(c *recorderConfig) { c.onDrop = o }

// WithDropHandler sets a function called for every value a watcher misses,
// one call per value. The default is no handler; nil removes one. Counters
// are kept whether or not a handler is set; see [Watcher.Stats].
//
// The handler runs with no lock of the broadcaster held, so it may call the
// broadcaster and its watchers (a blocking publish from it waits like any
// other). It is called by whichever goroutine settles the drop: the
// publisher that made it, a reader of the watcher (drops of lossy watchers
// read with the pull methods are settled lazily, at the latest when the
// watcher is read, stopped or its values are about to be overwritten), or
// the caller of Stop or Shutdown. Calls may therefore run concurrently and
// arrive after the value's publish returned. A panic in it is recovered and
// counted in [Stats].Panics.
//
// Passed to [NewRecorder], it receives every value the recorder or one of
// its runners drops, for any [DropReason], from the same goroutines and from
// runner goroutines: there, a call of the recorder's Flush or Shutdown
// waits for the runner calling it, so give it a context that ends.
func WithDropHandler(f func(Drop)) CommonOption { return dropHandlerOption(f) }

type historyOption int

func (o historyOption) applyOption(c *config) { c.history, c.newOnly = int(o), "WithHistory" }

// WithHistory makes a broadcaster keep its last n accepted values, so that a
// watcher can start with some of them ([WithReplay]). The default is 0: no
// history, and no cost. A negative n, or one above [MaxHistory], is an
// error returned by every method of the broadcaster that returns an error.
// The history shares the broadcaster's ring, which grows to hold it: n
// values of T stay referenced until overwritten.
func WithHistory(n int) Option { return historyOption(n) }

type replayOption int

func (o replayOption) applyOption(c *config) { c.replay = int(o) }

// WithReplay makes a watcher receive the last k values the broadcaster
// accepted before it registered (or all of them, if fewer were accepted)
// first, then every value accepted after, with no gap and no duplicate: the
// in-process form of "resume from here". k must be at most the
// broadcaster's history ([WithHistory]); a larger k makes Watch return an
// error. As with a prefix, the watcher's queue capacity becomes at least
// the number of values it starts with plus one. Passed to [New] it sets the
// default for every watcher. The default is 0.
func WithReplay(k int) Option { return replayOption(k) }

type clockOption struct{ c Clock }

func (o clockOption) applyRecorder(c *recorderConfig) { c.clock = o.c }

// WithClock sets the clock a [Recorder] passes to its stamp hook (see
// [WithStamp]). The default is the system clock.
func WithClock(c Clock) RecorderOption { return clockOption{c} }

type retryOption RetryPolicy

func (o retryOption) applyRecorder(c *recorderConfig) {
	p := RetryPolicy(o)
	c.retry = &p
}

// WithRetry sets how a [Recorder]'s sink runners retry failed writes. The
// default is [DefaultRetryPolicy]. [NewRecorder] returns an error for an
// invalid policy.
func WithRetry(p RetryPolicy) RecorderOption { return retryOption(p) }

type loggerOption struct{ l *slog.Logger }

func (o loggerOption) applyRecorder(c *recorderConfig) { c.logger = o.l }

// WithLogger makes a [Recorder] log every dropped value, at level Warn, with
// its reason and error. The default is no logging (the counters in
// [Recorder.Stats] are always kept).
func WithLogger(l *slog.Logger) RecorderOption { return loggerOption{l} }

type stampOption struct{ f any }

func (o stampOption) applyRecorder(c *recorderConfig) { c.stamp = o.f }

// WithStamp sets a hook that a [Recorder] calls on every value before
// publishing it, with the recorder's clock reading (see [WithClock]); it
// returns the value to publish, for example v with a timestamp set. It runs
// on the goroutine calling [Recorder.Record]. [NewRecorder] returns an error
// when T is not the recorder's value type: Go cannot check that at compile
// time while the other recorder options stay untyped (a generic option list
// would need every option instantiated with T).
func WithStamp[T any](f func(v T, now time.Time) T) RecorderOption {
	if f == nil {
		return stampOption{}
	}
	return stampOption{f}
}

type filterOption struct{ f any }

func (o filterOption) applyOption(c *config) { c.filter = o.f }

// WithFilter makes a watcher receive only the values for which keep
// returns true; the others are neither delivered nor counted as drops, but
// as filtered ([WatcherStats].Filtered). Queue length and drops count kept
// values only: a watcher is full when the values its filter kept fill its
// queue, so a watcher that waits when full never makes a publisher wait
// for a value it rejects, and a lossy one drops only values it would have
// kept. It applies to a prefix and replayed values too. Passed to [New] it
// sets the default for every watcher; nil removes a filter. T must be the
// broadcaster's value type: Watch (or, for New, every call) returns an
// error otherwise, as Go cannot check it at compile time while the other
// options stay untyped.
//
// keep is asked once per value, with no lock held, so it may call the
// broadcaster, except a publish method that waits: by the goroutine that
// reads the watcher, as it reaches the value; or, when the watcher's queue
// is full of values keep has not seen and no goroutine is reading it, by a
// publisher holding the publish turn, which keeps the kept values and
// frees the rest of the queue (see "Filters" in the package documentation);
// for a watcher read through ResultChan, by the publishers, before the
// channel pass. Two calls hold the broadcaster's lock and must not call it:
// Watch with [WithReplay] asks about the replayed values, and the first
// ResultChan about the values queued until then. keep should be fast and
// depend on the value only. A panic in it makes the watcher miss that
// value, counted as [DropPanic]. One that ends its goroutine
// (runtime.Goexit: t.FailNow or t.Fatal in a test's filter) is supported
// only where the watcher's reader asks it, in Recv, Next or All: it ends
// that call, and the values the call had taken and not returned are
// dropped, counted as [DropPanic] (not in [Stats].Panics: it is no panic).
// Elsewhere (a publisher's goroutine, ResultChan, Watch with WithReplay)
// it ends a goroutine that holds the broadcaster's lock or publish turn,
// and the broadcaster stops working: do not.
func WithFilter[T any](keep func(v T) bool) Option {
	if keep == nil {
		return filterOption{}
	}
	return filterOption{keep}
}

// filterOf returns the filter of cfg as a func(T) bool, or an error if it
// takes another type.
func filterOf[T any](cfg config) (func(T) bool, error) {
	if cfg.filter == nil {
		return nil, nil
	}
	keep, ok := cfg.filter.(func(T) bool)
	if !ok {
		var v T
		return nil, fmt.Errorf("fanout: WithFilter: the filter is a %T, the values are %T", cfg.filter, v)
	}
	return keep, nil
}

type nameOption string

func (o nameOption) applyOption(c *config) { c.name = string(o) }

// WithName names a watcher, for people: the name is in its [WatcherStats],
// in every [Drop] and [FullState] about it, and in what is logged about it.
// It need not be unique. The default is "". Passed to [New] it names every
// watcher alike, which is rarely useful.
func WithName(name string) Option { return nameOption(name) }
