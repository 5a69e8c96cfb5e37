package events

import (
	"fmt"
	"time"

	"github.com/fanout-go/fanout"
)

// client-go's defaults (tools/events/event_broadcaster.go), and the bound
// of the series cache, which client-go does not have.
const (
	maxTriesPerEvent     = 12
	defaultSleepDuration = 10 * time.Second
	retryJitter          = 0.25
	maxQueuedEvents      = 1000
	finishTime           = 6 * time.Minute
	refreshTime          = 30 * time.Minute
	defaultCacheSize     = 4096
)

// Option tunes a [Broadcaster] made by [New]. Each option's doc gives its
// default, which is client-go's where client-go has the setting.
type Option interface {
	apply(*config)
}

type config struct {
	sleep     time.Duration
	queue     int
	cacheSize int
}

func defaultConfig() config {
	return config{sleep: defaultSleepDuration, queue: maxQueuedEvents, cacheSize: defaultCacheSize}
}

func (c config) validate() error {
	switch {
	case c.sleep < 0:
		return fmt.Errorf("events: invalid sleep duration %v: must not be negative", c.sleep)
	case c.queue < 1 || c.queue > fanout.MaxQueueLength:
		return fmt.Errorf("events: invalid queue length %d: must be 1 to %d", c.queue, fanout.MaxQueueLength)
	case c.cacheSize < 1:
		return fmt.Errorf("events: invalid cache size %d: must be at least 1", c.cacheSize)
	}
	return nil
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithSleepDuration sets the pause between two attempts to write an event:
// d plus a random extra of up to 25% of d. The default is 10 s, as
// client-go's; 0 retries at once. A negative d makes [New] fail.
func WithSleepDuration(d time.Duration) Option {
	return optionFunc(func(c *config) { c.sleep = d })
}

// WithQueueLength sets how many events may wait for each sink and watcher
// (default 1000, as client-go's). An event that meets a full queue is
// dropped for that sink or watcher and counted in [eventstats.Stats]
// DroppedFull. n must be 1 to [fanout.MaxQueueLength], else [New] fails.
func WithQueueLength(n int) Option {
	return optionFunc(func(c *config) { c.queue = n })
}

// WithCacheSize bounds the series cache of each sink, in distinct series
// keys (default 4096; client-go's cache is unbounded). When it is full,
// the least recently seen key is forgotten: a later occurrence of it starts
// a new event, and occurrences merged into an evicted series and not yet
// written are counted as dropped (see [Broadcaster.Stats]). n must be at
// least 1, else [New] fails.
func WithCacheSize(n int) Option {
	return optionFunc(func(c *config) { c.cacheSize = n })
}
