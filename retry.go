package fanout

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how a sink runner retries a failed write.
type RetryPolicy struct {
	// MaxTries is the number of attempts per value, at least 1.
	MaxTries int
	// Sleep is the pause between attempts.
	Sleep time.Duration
	// Jitter adds a random extra of up to Jitter×Sleep to each pause; it
	// must be finite. A pause longer than the longest Duration is cut to it.
	Jitter float64
	// RandomFirst makes the first pause random in [0, Sleep), so that many
	// clients failing together do not retry together.
	RandomFirst bool
	// Retryable reports whether an error is worth retrying; a value whose
	// write fails with an error it rejects is dropped as [DropRejected].
	// Nil retries every error.
	Retryable func(error) bool
}

// DefaultRetryPolicy returns client-go tools/record's policy: 12 tries, 10 s
// apart, the first pause random, every error retried.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxTries: 12, Sleep: 10 * time.Second, RandomFirst: true}
}

func (p RetryPolicy) validate() error {
	if p.MaxTries < 1 || p.Sleep < 0 || !(p.Jitter >= 0 && p.Jitter <= math.MaxFloat64) {
		return fmt.Errorf("fanout: invalid RetryPolicy: MaxTries %d must be at least 1, Sleep %v and Jitter %v must not be negative", p.MaxTries, p.Sleep, p.Jitter)
	}
	return nil
}

// pause returns the sleep before attempt tries+1, after tries failures,
// saturating at the longest Duration.
func (p RetryPolicy) pause(tries int) time.Duration {
	d := float64(p.Sleep)
	if tries == 1 && p.RandomFirst {
		d *= rand.Float64()
	}
	if p.Jitter > 0 {
		d += p.Jitter * float64(p.Sleep) * rand.Float64()
	}
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}
