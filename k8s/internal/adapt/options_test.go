package adapt

import (
	"math"
	"strings"
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

// WithQueueLength never means the default or a hand-off in the adapters:
// a length below 1 or above the core's maximum is an error naming the
// option and the default.
func TestQueueLengthRefusesWhatIsNotALength(t *testing.T) {
	for _, n := range []int{0, -1, fanout.MaxQueueLength + 1} {
		err := QueueLength("record", n)
		if err == nil {
			t.Errorf("QueueLength(%d) = nil, want an error", n)
			continue
		}
		for _, want := range []string{"record: WithQueueLength(", "default, 1000"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("QueueLength(%d) = %q, want it to say %q", n, err, want)
			}
		}
	}
	for _, n := range []int{1, 1000, fanout.MaxQueueLength} {
		if err := QueueLength("events", n); err != nil {
			t.Errorf("QueueLength(%d) = %v, want nil", n, err)
		}
	}
}
