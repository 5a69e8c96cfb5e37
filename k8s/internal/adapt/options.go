package adapt

import (
	"fmt"
	"math"
	"time"

	"github.com/fanout-go/fanout"
)

// The option rules of the record and events packages, in one place so that
// an option of the same name means the same in both, and the same as the
// core's option of that name where there is one.
//
// Where client-go has the setting (CorrelatorOptions, WithSleepDuration),
// its rule holds, for drop-in compatibility: a zero size or count means
// the default, and a value out of range is normalised, as each function
// below says. Where it has not (WithQueueLength, WithCacheSize), the
// repository's rule holds: a value no setting can mean is an error,
// returned by a constructor that returns errors (events.New) and a panic
// of one whose client-go signature returns none (record.New,
// record.NewBroadcaster), as time.NewTicker does.

// Size returns n when it is positive, def when n is zero or negative
// (client-go's rule: a zero field means the default), and never more than
// limit.
func Size(n, def, limit int) int {
	if n <= 0 {
		n = def
	}
	return min(n, limit)
}

// QueueLength checks the length given to a WithQueueLength option of
// record or events: 1 to [fanout.MaxQueueLength]. Zero is an error, not
// the default: the core's WithQueueLength(0) is a hand-off queue, and the
// adapters do not give the same name the opposite meaning. A hand-off
// queue is not offered either: a sink would miss every event recorded
// while it writes.
func QueueLength(pkg string, n int) error {
	if n < 1 || n > fanout.MaxQueueLength {
		return fmt.Errorf("%s: WithQueueLength(%d): the length must be 1 to %d; leave the option out for the default, %d (unlike the core's, 0 is neither a hand-off nor the default here)",
			pkg, n, fanout.MaxQueueLength, fanout.DefaultRecorderQueueLength)
	}
	return nil
}

// DefaultWriters is the number of writes each sink of record and events
// makes at once (WithWriters). Measured against a real kube-apiserver and
// etcd on 2 cores (make bench-e2e, a burst of 1,000 distinct events): one
// writer took 3.6–4.2 s, 8 writers 1.0–1.4 s, 16 0.8–1.1 s, 32 0.7 s and
// 64 0.6–0.7 s, where client-go's tools/events, a goroutine per event,
// took 0.6–0.9 s. 32 is the fewest that kept up with it, and the fewest
// at 4× one writer on both APIs; an API server's own limits (its
// max-requests-inflight, 200 mutating, and priority and fairness) stay far
// above it.
const DefaultWriters = 32

// Writers checks the number given to a WithWriters option of record or
// events: 1 to [fanout.MaxWriters].
func Writers(pkg string, n int) error {
	if n < 1 || n > fanout.MaxWriters {
		return fmt.Errorf("%s: WithWriters(%d): the number must be 1 to %d; leave the option out for the default, %d",
			pkg, n, fanout.MaxWriters, DefaultWriters)
	}
	return nil
}

// CacheSize normalises a cache size option: zero or negative means
// [fanout.DefaultCacheSize] (4096, client-go's).
func CacheSize(n int) int {
	return Size(n, fanout.DefaultCacheSize, math.MaxInt)
}

// SleepDuration normalises the pause between two attempts to write an
// event: a negative pause means none, as in client-go, whose timer fires
// at once for a negative duration. Zero is no pause, not the default:
// client-go's WithSleepDuration(0) retries at once.
func SleepDuration(d time.Duration) time.Duration {
	return max(d, 0)
}

// DefaultSleepDuration is client-go's pause between two attempts to write
// an event (10 s), taken from [fanout.DefaultRetryPolicy].
var DefaultSleepDuration = fanout.DefaultRetryPolicy().Sleep

// Retry returns client-go's retry policy for a sink: the tries of
// [fanout.DefaultRetryPolicy] (12), the pause sleep normalised by
// [SleepDuration], and client-go's error classification ([Retryable]).
// The callers set the randomisation: record's first pause is random,
// events' pauses have a jitter.
func Retry(sleep time.Duration) fanout.RetryPolicy {
	return fanout.RetryPolicy{
		MaxTries:  fanout.DefaultRetryPolicy().MaxTries,
		Sleep:     SleepDuration(sleep),
		Retryable: Retryable,
	}
}
