package record

import (
	"context"
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
	err         error // a bad option value: New panics with it
}

// newConfig applies opts to the defaults and normalises the result.
func newConfig(opts []BroadcasterOption) config {
	c := config{sleep: adapt.DefaultSleepDuration, queueLength: fanout.DefaultRecorderQueueLength}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	c.sleep = adapt.SleepDuration(c.sleep)
	c.err = adapt.QueueLength("record", c.queueLength)
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
