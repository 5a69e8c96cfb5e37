package adapt

import (
	"math"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
)

func TestSizeMeansDefaultWhenNotPositiveAndIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name          string
		n, def, limit int
		want          int
	}{
		{"positive kept", 3, 10, 100, 3},
		{"zero is the default", 0, 10, 100, 10},
		{"negative is the default", -1, 10, 100, 10},
		{"most negative is the default", math.MinInt, 10, 100, 10},
		{"above the limit is the limit", 101, 10, 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Size(tc.n, tc.def, tc.limit); got != tc.want {
				t.Errorf("Size(%d, %d, %d) = %d, want %d", tc.n, tc.def, tc.limit, got, tc.want)
			}
		})
	}
}

func TestDefaultsAreTheCoresAndClientGos(t *testing.T) {
	if got := QueueLength(0); got != 1000 {
		t.Errorf("QueueLength(0) = %d, want 1000", got)
	}
	if got := QueueLength(fanout.MaxQueueLength + 1); got != fanout.MaxQueueLength {
		t.Errorf("QueueLength(max+1) = %d, want %d", got, fanout.MaxQueueLength)
	}
	if got := CacheSize(-1); got != 4096 {
		t.Errorf("CacheSize(-1) = %d, want 4096", got)
	}
	if DefaultSleepDuration != 10*time.Second {
		t.Errorf("DefaultSleepDuration = %v, want 10s", DefaultSleepDuration)
	}
	if p := Retry(-time.Second); p.MaxTries != 12 || p.Sleep != 0 || p.Retryable == nil {
		t.Errorf("Retry(-1s) = %+v, want 12 tries, no pause, client-go's classification", p)
	}
}

func TestSleepDurationNegativeMeansNoPause(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, math.MinInt64} {
		if got := SleepDuration(d); got != 0 {
			t.Errorf("SleepDuration(%v) = %v, want 0", d, got)
		}
	}
	if got := SleepDuration(time.Second); got != time.Second {
		t.Errorf("SleepDuration(1s) = %v", got)
	}
}
