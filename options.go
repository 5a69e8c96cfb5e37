package fanout

import "fmt"

// DefaultQueueLength is the per-watcher queue capacity used when
// [WithQueueLength] is not given.
const DefaultQueueLength = 100

// Option configures a [Broadcaster] when passed to [New], where it sets the
// default for every watcher, or a single watcher when passed to
// [Broadcaster.Watch] or [Broadcaster.WatchWithPrefix], where it overrides
// that default.
type Option interface {
	apply(*config)
}

type config struct {
	queueLen int
	behavior FullChannelBehavior
	onDrop   func(Drop)
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
	if c.queueLen < 0 {
		return fmt.Errorf("fanout: invalid queue length %d: must be 0 (hand-off) or more", c.queueLen)
	}
	return nil
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithQueueLength sets the watcher queue capacity: exactly n values may be
// waiting for a watcher's consumer. The default is [DefaultQueueLength] (100).
// Zero means hand-off: a value is given to the consumer directly and nothing
// is queued. A negative n makes Watch and WatchWithPrefix return an error.
func WithQueueLength(n int) Option {
	return optionFunc(func(c *config) { c.queueLen = n })
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
func WithDropHandler(f func(Drop)) Option {
	return optionFunc(func(c *config) { c.onDrop = f })
}
