package exporter

import (
	"fmt"
	"math"
	"time"

	"github.com/fanout-go/fanout"
)

// Retry is a receiver's retry policy as the configuration says it:
// exponential backoff from Initial, doubling up to Max, each pause drawn at
// random between half and all of it, so that sinks failing together do not
// retry together. The sinks run on the core's runner; [Retry.Policy] is
// the [fanout.RetryPolicy] that does this.
type Retry struct {
	// MaxTries is the number of attempts at a write before its
	// occurrences are dropped (counted as retries exhausted); 0 retries
	// until the write succeeds or the exporter shuts down.
	MaxTries int
	// Initial is the first pause; Max caps every pause.
	Initial, Max time.Duration
}

// DefaultRetry is the retry policy of a receiver that does not configure
// one: 10 tries, pauses from 500 ms doubling up to 30 s (1 to 2 minutes in
// all, with the jitter).
var DefaultRetry = Retry{MaxTries: 10, Initial: 500 * time.Millisecond, Max: 30 * time.Second}

func (r Retry) validate() error {
	if r.MaxTries < 0 || r.Initial <= 0 || r.Max < r.Initial {
		return fmt.Errorf("retry: maxTries %d must not be negative, initialBackoff %v must be positive and maxBackoff %v at least initialBackoff",
			r.MaxTries, r.Initial, r.Max)
	}
	return nil
}

// Policy returns the core policy that retries as r says: the pause after
// n consecutive failures is drawn from [d/2, d], d being Initial doubled
// n-1 times and capped at Max, that is a base pause of d/2 with a jitter of
// up to 100%. A [Permanent] error is not retried.
func (r Retry) Policy() fanout.RetryPolicy {
	tries := r.MaxTries
	if tries == 0 {
		tries = math.MaxInt
	}
	// Half of a 1 ns Initial is 0, which doubles to 0: at least 1 ns, so
	// that the pauses still grow to Max.
	return fanout.RetryPolicy{MaxTries: tries, Sleep: max(r.Initial/2, 1), MaxSleep: max(r.Max/2, 1), Jitter: 1,
		Retryable: func(err error) bool { return !IsPermanent(err) }}
}
