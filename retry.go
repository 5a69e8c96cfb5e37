package fanout

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how a runner retries a failed write: the runners of a
// [Recorder] (see [WithRetry]) and those started by [StartBatchSink]. The
// pause after the first failure is Sleep; with MaxSleep set it doubles
// after each further failure up to MaxSleep (exponential backoff), and
// Jitter and RandomFirst spread it so that clients failing together do not
// retry together.
type RetryPolicy struct {
	// MaxTries is the number of attempts per value, at least 1; a write
	// that stores some of a batch starts the count again for the rest.
	// math.MaxInt retries until the write succeeds or the runner stops.
	MaxTries int
	// Sleep is the pause after the first failed attempt.
	Sleep time.Duration
	// MaxSleep, if set, makes the pause double after each further
	// failure, up to MaxSleep; it must then be at least Sleep. Zero keeps
	// every pause at Sleep.
	MaxSleep time.Duration
	// Jitter adds a random extra of up to Jitter times the pause to it; it
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

// Validate returns an error describing what is wrong with p, or nil.
func (p RetryPolicy) Validate() error {
	if p.MaxTries < 1 || p.Sleep < 0 || p.MaxSleep < 0 || (p.MaxSleep > 0 && p.MaxSleep < p.Sleep) ||
		!(p.Jitter >= 0 && p.Jitter <= math.MaxFloat64) {
		return fmt.Errorf("fanout: invalid RetryPolicy: MaxTries %d must be at least 1, Sleep %v, MaxSleep %v and Jitter %v must not be negative, and a MaxSleep must be at least Sleep",
			p.MaxTries, p.Sleep, p.MaxSleep, p.Jitter)
	}
	return nil
}

// Pause returns the pause after the given number of consecutive failures
// (at least 1), saturating at the longest Duration.
func (p RetryPolicy) Pause(failures int) time.Duration { return p.pause(failures) }

// pause returns the sleep before attempt tries+1, after tries failures,
// saturating at the longest Duration.
func (p RetryPolicy) pause(tries int) time.Duration {
	base := float64(p.Sleep)
	if p.MaxSleep > p.Sleep {
		// A zero Sleep doubles to zero: the loop would run tries times.
		for i := 1; i < tries && base > 0 && base < float64(p.MaxSleep); i++ {
			base *= 2
		}
		base = min(base, float64(p.MaxSleep))
	}
	d := base
	if tries == 1 && p.RandomFirst {
		d *= rand.Float64()
	}
	if p.Jitter > 0 {
		d += p.Jitter * base * rand.Float64()
	}
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}
