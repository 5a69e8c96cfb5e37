package adapt

import (
	"math"
	"time"

	"github.com/fanout-go/fanout"
)

// The option rule of the record and events packages, in one place so that
// an option of the same name means the same in both. It is client-go's
// rule for its CorrelatorOptions, extended to every setting: a zero size
// or count means the default, silently. Options never make a constructor
// fail, because record's constructors have client-go's signatures, which
// return no error; a value no setting can mean is normalised instead, as
// each function below says, and each package doc says so too.

// Size returns n when it is positive, def when n is zero or negative
// (client-go's rule: a zero field means the default), and never more than
// limit.
func Size(n, def, limit int) int {
	if n <= 0 {
		n = def
	}
	return min(n, limit)
}

// QueueLength normalises a queue length option: zero or negative means
// [fanout.DefaultRecorderQueueLength] (1000, client-go's), and a length
// above [fanout.MaxQueueLength] means that.
func QueueLength(n int) int {
	return Size(n, fanout.DefaultRecorderQueueLength, fanout.MaxQueueLength)
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
