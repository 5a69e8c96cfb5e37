package record

import (
	"context"
	"errors"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
)

// BroadcasterOption configures [NewBroadcaster]. The options client-go
// has behave as client-go's: a zero size means the default and a value
// out of range is normalised. The one it has not, [WithQueueLength],
// follows the repository's rule: a value no setting can mean makes New
// and NewBroadcaster panic, since their client-go signature returns no
// error (see "Options" in the package doc).
type BroadcasterOption func(*config)

type config struct {
	correlator  CorrelatorOptions
	ctx         context.Context
	sleep       time.Duration
	queueLength int
	writers     int
	err         error // a bad option value: New panics with it
}

// newConfig applies opts to the defaults and normalises the result.
func newConfig(opts []BroadcasterOption) config {
	c := config{sleep: adapt.DefaultSleepDuration, queueLength: fanout.DefaultRecorderQueueLength, writers: DefaultWriters}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	c.sleep = adapt.SleepDuration(c.sleep)
	c.err = errors.Join(adapt.QueueLength("record", c.queueLength), adapt.Writers("record", c.writers))
	return c
}

// retry is client-go's retry policy with the configured pause: 12 tries,
// the first pause random in [0, sleep).
func (c config) retry() fanout.RetryPolicy {
	p := adapt.Retry(c.sleep)
	p.RandomFirst = true
	return p
}

// WithCorrelatorOptions tunes the aggregation, deduplication and spam
// filter that every sink started with [Broadcaster.StartRecordingToSink]
// gets (each sink has its own caches). A zero field means client-go's
// default, and so does a negative one (see [CorrelatorOptions]).
func WithCorrelatorOptions(options CorrelatorOptions) BroadcasterOption {
	return func(c *config) { c.correlator = options }
}

// WithContext gives the broadcaster a context: cancelling it shuts the
// broadcaster down (as [Broadcaster.Shutdown]), and its logger, if any
// (klog.FromContext), is the broadcaster's. A nil context is ignored.
func WithContext(ctx context.Context) BroadcasterOption {
	return func(c *config) { c.ctx = ctx }
}

// WithSleepDuration sets the pause between attempts to write an event
// (default 10 s, as client-go's; the first pause is random in [0, d)). Zero
// retries at once, and so does a negative duration, as in client-go.
func WithSleepDuration(sleepDuration time.Duration) BroadcasterOption {
	return func(c *config) { c.sleep = sleepDuration }
}

// WithQueueLength sets the length of each sink's and watcher's queue, 1 to
// [fanout.MaxQueueLength] (default 1000, as client-go's fixed queue); an
// event that meets a full queue is dropped for that sink or watcher and
// counted. client-go has no such option. Any other n makes [New] and
// [NewBroadcaster] panic with a message that says so: 0 is neither the
// default (leave the option out for that) nor the core's hand-off queue
// ([fanout.WithQueueLength](0)), so that the name never means both.
func WithQueueLength(n int) BroadcasterOption {
	return func(c *config) { c.queueLength = n }
}

// DefaultWriters is the number of writes each sink started with
// [Broadcaster.StartRecordingToSink] makes at once by default.
const DefaultWriters = adapt.DefaultWriters

// WithWriters sets how many writes each sink started with
// [Broadcaster.StartRecordingToSink] makes at once, 1 to
// [fanout.MaxWriters] (default [DefaultWriters]). client-go makes one at
// a time, so that a burst takes as many API round trips in a row as it has
// events. The sink's correlator still sees every event in order, on one
// goroutine, and decides as client-go's does; its writes then go to up to
// n goroutines, one write per Event at a time, so that an Event is created
// before it is patched and its counts follow one another, while other
// Events are written in parallel and an Event whose writes fail and are
// retried holds back only itself. One difference with more than one
// writer: client-go's correlator refreshes an Event's place in its caches
// when its write ends, which here may come after later events were
// correlated, so the decisions can differ from client-go's once more
// distinct events are live than the caches hold (4096 by default; then
// the least recently seen are forgotten first). The EventSink is called
// from up to n goroutines at once: client-go's EventSinkImpl is safe for
// that; pass WithWriters(1) for a sink of your own that is not. Any other
// n makes [New] and [NewBroadcaster] panic ([NewChecked] returns the
// error).
func WithWriters(n int) BroadcasterOption {
	return func(c *config) { c.writers = n }
}
