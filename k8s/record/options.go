package record

import (
	"context"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
)

// BroadcasterOption configures [NewBroadcaster]. As in client-go, no
// option makes it fail: a zero size means the default and any other value
// out of range is normalised, as each option says (see "Options" in the
// package doc).
type BroadcasterOption func(*config)

type config struct {
	correlator  CorrelatorOptions
	ctx         context.Context
	sleep       time.Duration
	queueLength int
}

// newConfig applies opts to the defaults and normalises the result.
func newConfig(opts []BroadcasterOption) config {
	c := config{sleep: adapt.DefaultSleepDuration}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	c.sleep = adapt.SleepDuration(c.sleep)
	c.queueLength = adapt.QueueLength(c.queueLength)
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

// WithQueueLength sets the length of each sink's and watcher's queue
// (default 1000, as client-go's); an event that meets a full queue is
// dropped for that sink or watcher and counted. Zero or negative means the
// default; a length above [fanout.MaxQueueLength] means that. client-go
// has no such option.
func WithQueueLength(n int) BroadcasterOption {
	return func(c *config) { c.queueLength = n }
}
