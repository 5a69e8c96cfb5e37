package events

import (
	"errors"
	"fmt"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
)

// client-go's defaults (tools/events/event_broadcaster.go) that the core
// does not have; the tries, pause, queue length and cache size are the
// core's ([fanout.DefaultRetryPolicy], [fanout.DefaultRecorderQueueLength],
// [fanout.DefaultCacheSize]).
const (
	retryJitter = 0.25
	finishTime  = 6 * time.Minute
	refreshTime = 30 * time.Minute
)

// maxTriesPerEvent is client-go's number of attempts to write an event.
var maxTriesPerEvent = fanout.DefaultRetryPolicy().MaxTries

// Option tunes a [Broadcaster] made by [New]. Each option's doc gives its
// default, which is client-go's where client-go has the setting.
// [WithSleepDuration], client-go's, normalises a value out of range as
// client-go does; [WithQueueLength] and [WithCacheSize], which client-go
// has not, make [New] return an error for a value no setting can mean
// (see "Options" in the package doc).
type Option interface {
	apply(*config)
}

type config struct {
	sleep     time.Duration
	queue     int
	cacheSize int
	writers   int
	err       error // a bad option value: New returns it
}

// newConfig applies opts to the defaults and normalises the result.
func newConfig(opts []Option) config {
	c := config{sleep: adapt.DefaultSleepDuration, queue: fanout.DefaultRecorderQueueLength, writers: DefaultWriters}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	c.sleep = adapt.SleepDuration(c.sleep)
	c.err = errors.Join(adapt.QueueLength("events", c.queue), adapt.Writers("events", c.writers))
	if c.cacheSize < 0 && c.err == nil {
		c.err = fmt.Errorf("events: WithCacheSize(%d): the size must be 0 (the default, %d) or more", c.cacheSize, fanout.DefaultCacheSize)
	}
	c.cacheSize = adapt.CacheSize(c.cacheSize)
	return c
}

// retry is client-go's retry policy with the configured pause: 12 tries,
// each pause sleep plus up to 25% jitter.
func (c config) retry() fanout.RetryPolicy {
	p := adapt.Retry(c.sleep)
	p.Jitter = retryJitter
	return p
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithSleepDuration sets the pause between two attempts to write an event:
// d plus a random extra of up to 25% of d. The default is 10 s, as
// client-go's. Zero retries at once, and so does a negative d, as in
// client-go.
func WithSleepDuration(d time.Duration) Option {
	return optionFunc(func(c *config) { c.sleep = d })
}

// WithQueueLength sets how many events may wait for each sink and watcher,
// 1 to [fanout.MaxQueueLength] (default 1000, as client-go's fixed
// queue). An event that meets a full queue is dropped for that sink or
// watcher and counted in [eventstats.Stats] DroppedFull. [New] returns an
// error for any other n: 0 is neither the default (leave the option out
// for that) nor the core's hand-off queue ([fanout.WithQueueLength](0)),
// so that the name never means both.
func WithQueueLength(n int) Option {
	return optionFunc(func(c *config) { c.queue = n })
}

// WithCacheSize bounds the series cache of each sink, in distinct series
// keys (default 4096; client-go's cache is unbounded). When it is full,
// the least recently seen key is forgotten: a later occurrence of it starts
// a new event, and occurrences merged into an evicted series and not yet
// written are counted as dropped (see [Broadcaster.Stats]). Zero means the
// default, as the core's [fanout.CorrelatorConfig].CacheSize; [New]
// returns an error for a negative n.
func WithCacheSize(n int) Option {
	return optionFunc(func(c *config) { c.cacheSize = n })
}

// DefaultWriters is the number of writes each sink makes at once by
// default.
const DefaultWriters = adapt.DefaultWriters

// WithWriters sets how many writes each sink started with
// [Broadcaster.StartRecordingToSinkWithContext] makes at once, 1 to
// [fanout.MaxWriters] (default [DefaultWriters]). client-go v0.37 writes
// each event on a goroutine of its own, unbounded; fanout's sink writes up
// to n at once and no more. The writes of one series (client-go's series
// key: type, action, reason, reporting controller and instance, regarding
// and related objects) keep their order: its first event is created
// before the series is patched. Series are written in parallel, and a
// series whose writes fail and are retried holds back only itself. The
// EventSink is then called from up to n goroutines at once (and from the
// maintenance goroutine, as before): [EventSinkImpl] is safe for that;
// pass WithWriters(1) for a sink of your own that is not. The series are
// still correlated in order, on one goroutine. [New] returns an error for
// any other n.
func WithWriters(n int) Option {
	return optionFunc(func(c *config) { c.writers = n })
}
