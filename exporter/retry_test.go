package exporter

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
)

// The core policy of a receiver's Retry draws the pause after n failures
// from [d/2, d], d being Initial doubled n-1 times and capped at Max, does
// not retry a Permanent error, and retries forever for MaxTries 0.
func TestRetryPolicyBacksOffFromInitialToMaxWithHalfJitter(t *testing.T) {
	r := Retry{MaxTries: 0, Initial: 100 * time.Millisecond, Max: time.Second}
	p := r.Policy()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.MaxTries != math.MaxInt {
		t.Errorf("MaxTries 0: the policy's MaxTries is %d, want math.MaxInt (until it succeeds)", p.MaxTries)
	}
	for n, d := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 30: time.Second} {
		for range 50 {
			if got := p.Pause(n); got < d/2 || got > d {
				t.Fatalf("pause after %d failures: %v, want within [%v, %v]", n, got, d/2, d)
			}
		}
	}
	if p.Retryable(Permanent(errors.New("bad request"))) || !p.Retryable(errors.New("timeout")) {
		t.Error("a Permanent error must not be retried, any other must")
	}
}

// The sink drop metric keeps the exporter's label values; they name the
// core's reasons.
func TestDropLabelsKeepTheExportersValues(t *testing.T) {
	want := map[fanout.DropReason]string{fanout.DropOldest: "queue_oldest", fanout.DropFull: "queue_full",
		fanout.DropTimeout: "queue_timeout", fanout.DropRejected: "rejected", fanout.DropRetries: "retries_exhausted",
		fanout.DropPanic: "panic", fanout.DropShutdown: "shutdown"}
	if len(sinkDropReasons) != len(want) {
		t.Fatalf("%d sink drop reasons, want %d", len(sinkDropReasons), len(want))
	}
	for _, r := range sinkDropReasons {
		if got := DropLabel(r); got != want[r] {
			t.Errorf("DropLabel(%v) = %q, want %q", r, got, want[r])
		}
	}
}

// The pauses grow to Max from the smallest valid Initial too: half of
// 1 ns was a zero Sleep, which doubles to zero, so every pause was 0 and
// a sink that kept failing was retried in a busy loop for ever.
func TestRetryPolicyFromANanosecondInitialStillBacksOffToMax(t *testing.T) {
	r := Retry{MaxTries: 0, Initial: time.Nanosecond, Max: time.Second}
	if err := r.validate(); err != nil {
		t.Fatal(err)
	}
	p := r.Policy()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if got := p.Pause(40); got < time.Second/2 || got > time.Second {
			t.Fatalf("pause after 40 failures: %v, want within [%v, %v]", got, time.Second/2, time.Second)
		}
	}
}
