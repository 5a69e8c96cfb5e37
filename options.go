package fanout

import (
	"fmt"
	"log/slog"
	"time"
)

// DefaultQueueLength is the per-watcher queue capacity used when
// [WithQueueLength] is not given.
const DefaultQueueLength = 100

// MaxQueueLength is the largest queue capacity [WithQueueLength] accepts
// (16,777,216 values).
const MaxQueueLength = 1 << 24

// Option configures a [Broadcaster] when passed to [New], where it sets the
// default for every watcher, or a single watcher when passed to
// [Broadcaster.Watch] or [Broadcaster.WatchWithPrefix], where it overrides
// that default. Passed to [NewRecorder] it configures the recorder and the
// queues of its runners. Each option's doc says where it applies; elsewhere
// it is ignored.
type Option interface {
	apply(*config)
}

type config struct {
	queueLen    int
	queueLenSet bool
	behavior    FullChannelBehavior
	onDrop      func(Drop)

	// Recorder settings.
	clock  Clock
	retry  *RetryPolicy
	logger *slog.Logger
	stamp  any // func(T, time.Time) T, checked by NewRecorder[T]
}

func defaultConfig() config {
	return config{queueLen: DefaultQueueLength, behavior: WaitIfChannelFull}
}

func (c config) with(opts []Option) config {
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

func (c config) validate() error {
	if c.queueLen < 0 || c.queueLen > MaxQueueLength {
		return fmt.Errorf("fanout: invalid queue length %d: must be 0 (hand-off) to MaxQueueLength (%d)", c.queueLen, MaxQueueLength)
	}
	return nil
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithQueueLength sets the watcher queue capacity: exactly n values may be
// waiting for a watcher's consumer. The default is [DefaultQueueLength] (100)
// for a broadcaster's watchers and [DefaultRecorderQueueLength] (1000) for a
// recorder's runners. Zero means hand-off: a value is given to the consumer
// directly and nothing is queued. A negative n, or one above
// [MaxQueueLength], makes Watch, WatchWithPrefix and NewRecorder return an
// error.
func WithQueueLength(n int) Option {
	return optionFunc(func(c *config) { c.queueLen, c.queueLenSet = n, true })
}

// WithFullChannelBehavior sets what happens when a value meets a full watcher
// queue. The default is [WaitIfChannelFull]; nil restores the default.
func WithFullChannelBehavior(b FullChannelBehavior) Option {
	return optionFunc(func(c *config) {
		if b == nil {
			b = WaitIfChannelFull
		}
		c.behavior = b
	})
}

// WithDropHandler sets a function called for every value a watcher misses
// (each call reports one value). It runs on the publishing goroutine while it
// has the broadcaster to itself, so it must be fast and must not call the
// broadcaster or its watchers; hand the Drop to a buffered channel or a
// counter. Calls never overlap.
// Counters are kept whether or not a handler is set; see [Watcher.Stats].
// The default is no handler; nil removes one.
//
// Passed to [NewRecorder], it receives every value the recorder or one of
// its runners drops, for any [DropReason]. It is then called from
// [Recorder.Record] (after the value is published, with no lock held) and
// from runner goroutines, possibly concurrently; it should be fast, since the
// caller of Record or the runner waits for it. A panic in it is contained.
func WithDropHandler(f func(Drop)) Option {
	return optionFunc(func(c *config) { c.onDrop = f })
}

// WithClock sets the clock a [Recorder] passes to its stamp hook (see
// [WithStamp]). The default is the system clock. It applies to
// [NewRecorder].
func WithClock(c Clock) Option {
	return optionFunc(func(cfg *config) { cfg.clock = c })
}

// WithRetry sets how a [Recorder]'s sink runners retry failed writes. The
// default is [DefaultRetryPolicy]. It applies to [NewRecorder], which returns
// an error for an invalid policy.
func WithRetry(p RetryPolicy) Option {
	return optionFunc(func(c *config) { c.retry = &p })
}

// WithLogger makes a [Recorder] log every dropped value, at level Warn, with
// its reason and error. The default is no logging (the counters in
// [Recorder.Stats] are always kept). It applies to [NewRecorder].
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.logger = l })
}

// WithStamp sets a hook that a [Recorder] calls on every value before
// publishing it, with the recorder's clock reading (see [WithClock]); it
// returns the value to publish, for example v with a timestamp set. It runs
// on the goroutine calling [Recorder.Record]. It applies to [NewRecorder],
// which returns an error when T is not the recorder's value type.
func WithStamp[T any](f func(v T, now time.Time) T) Option {
	return optionFunc(func(c *config) {
		if f == nil {
			c.stamp = nil
			return
		}
		c.stamp = f
	})
}
