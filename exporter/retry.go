package exporter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Retry says how a sink's failed writes are retried: exponential backoff
// from Initial, doubling up to Max, each pause drawn at random between half
// and all of it, so that sinks failing together do not retry together.
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

// pause returns the pause after the given number of consecutive failures
// (at least 1).
func (r Retry) pause(failures int) time.Duration {
	d := r.Initial
	for i := 1; i < failures && d < r.Max; i++ {
		d *= 2
	}
	d = min(d, r.Max)
	return d/2 + rand.N(d/2+1)
}

// sleep waits for d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
