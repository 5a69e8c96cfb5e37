package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// The default policy is client-go's schedule: after the first failure a
// random pause in [0, Sleep), then Sleep each time; MaxTries attempts in
// all, then the value is dropped as DropRetries with the last error.
func TestRetryDefaultPolicyFollowsClientGosSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var drops []fanout.Drop
		var mu sync.Mutex
		r := newRecorder[ev](t, fanout.WithRetry(fanout.DefaultRetryPolicy()), fanout.WithDropHandler(func(d fanout.Drop) {
			mu.Lock()
			drops = append(drops, d)
			mu.Unlock()
		}))
		boom := errors.New("connection refused")
		sink := &fanouttest.Sink[ev]{Fail: func(string, ev, int) error { return boom }}
		run := startSink(t, r, sink, nil)
		start := time.Now()
		require.NoError(t, r.Record(ev{Msg: "m"}))
		require.NoError(t, r.Flush(t.Context()))

		calls := sink.Calls()
		require.Len(t, calls, 12, "12 tries")
		assert.Equal(t, start, calls[0].At, "the first try is immediate")
		first := calls[1].At.Sub(calls[0].At)
		assert.GreaterOrEqual(t, first, time.Duration(0))
		assert.Less(t, first, 10*time.Second, "the first pause is random in [0, 10 s)")
		for i := 2; i < len(calls); i++ {
			assert.Equal(t, 10*time.Second, calls[i].At.Sub(calls[i-1].At), "pause %d", i)
		}
		st := run.Stats()
		assert.Equal(t, uint64(12), st.Failures)
		assert.Equal(t, uint64(11), st.Retries, "every failure but the last is retried")
		assert.Equal(t, uint64(1), st.DroppedRetries)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, drops, 1)
		assert.Equal(t, fanout.DropRetries, drops[0].Reason)
		assert.ErrorIs(t, drops[0].Err, boom)
		assert.Equal(t, run.Stats().Received, uint64(1))
	})
}

// Jitter lengthens each pause by a random extra of up to Jitter×Sleep.
func TestRetryJitterAddsUpToJitterTimesSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t, fanout.WithRetry(fanout.RetryPolicy{MaxTries: 30, Sleep: 10 * time.Second, Jitter: 0.25}))
		sink := &fanouttest.Sink[ev]{Fail: func(string, ev, int) error { return errors.New("down") }}
		startSink(t, r, sink, nil)
		require.NoError(t, r.Record(ev{Msg: "m"}))
		require.NoError(t, r.Flush(t.Context()))
		calls := sink.Calls()
		require.Len(t, calls, 30)
		distinct := map[time.Duration]bool{}
		for i := 1; i < len(calls); i++ {
			d := calls[i].At.Sub(calls[i-1].At)
			assert.GreaterOrEqual(t, d, 10*time.Second)
			assert.LessOrEqual(t, d, 12500*time.Millisecond)
			distinct[d] = true
		}
		assert.Greater(t, len(distinct), 1, "pauses vary")
	})
}

// A value is retried until a write succeeds; the runner makes one write at
// a time, so the next value waits for it.
func TestRetryUntilAWriteSucceedsOneValueAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t, fastRetry(5))
		sink := &fanouttest.Sink[ev]{
			Key: func(e ev) string { return e.Msg },
			Fail: func(_ string, _ ev, attempt int) error {
				if attempt < 3 {
					return errors.New("flaky")
				}
				return nil
			},
		}
		run := startSink(t, r, sink, nil)
		require.NoError(t, r.Record(ev{Msg: "a"}))
		require.NoError(t, r.Record(ev{Msg: "b"}))
		require.NoError(t, r.Flush(t.Context()))
		var order []string
		for _, c := range sink.Calls() {
			order = append(order, fmt.Sprint(c.Value.Msg, c.Err == nil))
		}
		assert.Equal(t, []string{"afalse", "afalse", "atrue", "bfalse", "bfalse", "btrue"}, order,
			"one write at a time, in order")
		st := run.Stats()
		assert.Equal(t, uint64(2), st.Written)
		assert.Equal(t, uint64(4), st.Failures)
		assert.Equal(t, uint64(0), st.Dropped)
	})
}

// An error that Retryable rejects drops the value as DropRejected at once,
// without a retry.
func TestRetryableRejectingAnErrorDropsTheValueAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		invalid := errors.New("invalid")
		r := newRecorder[ev](t, fanout.WithRetry(fanout.RetryPolicy{MaxTries: 12, Sleep: time.Second,
			Retryable: func(err error) bool { return !errors.Is(err, invalid) }}))
		sink := &fanouttest.Sink[ev]{Fail: func(_ string, e ev, _ int) error {
			if e.Msg == "bad" {
				return fmt.Errorf("rejected: %w", invalid)
			}
			return nil
		}}
		run := startSink(t, r, sink, nil)
		require.NoError(t, r.Record(ev{Msg: "bad"}))
		require.NoError(t, r.Record(ev{Msg: "good"}))
		require.NoError(t, r.Flush(t.Context()))
		assert.Len(t, sink.Calls(), 2, "no retry of a rejected value")
		st := run.Stats()
		assert.Equal(t, uint64(1), st.DroppedRejected)
		assert.Equal(t, uint64(1), st.Written)
	})
}

// A panic in Retryable, a user function called on the runner's goroutine,
// drops the value as DropRejected (its error cannot be judged retryable)
// and the runner goes on, as for a panicking sink or handler.
func TestRetryablePanicDropsTheValueAsRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var drops []fanout.Drop
		r := newRecorder[item](t,
			fanout.WithRetry(fanout.RetryPolicy{MaxTries: 3, Sleep: time.Millisecond,
				Retryable: func(err error) bool { panic("Retryable bug: " + err.Error()) }}),
			fanout.WithDropHandler(func(d fanout.Drop) {
				mu.Lock()
				defer mu.Unlock()
				drops = append(drops, d)
			}))
		sink := &fanouttest.Sink[item]{Fail: func(string, item, int) error { return errors.New("down") }}
		run := startSink(t, r, sink, nil)
		for i := range 2 {
			require.NoError(t, r.Record(item{N: i}))
		}
		require.NoError(t, r.Flush(context.Background()))
		st := run.Stats()
		assert.Equal(t, uint64(2), st.DroppedRejected, "both values dropped, the runner alive")
		assert.Len(t, sink.Calls(), 2, "no retry")
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, drops, 2)
		for _, d := range drops {
			assert.Equal(t, fanout.DropRejected, d.Reason)
			assert.ErrorContains(t, d.Err, "Retryable bug: down")
		}
	})
}

// A pause longer than the longest Duration is cut to it, never wrapped
// around to a negative one (which would retry at once, a hot loop against
// a failing server); Shutdown still ends it at once. An infinite Jitter is
// rejected by NewRecorder (see TestNewRecorderRejectsInvalidConfig).
func TestRetryPauseSaturatesAtTheLongestDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fanout.RetryPolicy{MaxTries: 3, Sleep: math.MaxInt64, Jitter: 1}
		r, err := fanout.NewRecorder[item](fanout.WithRetry(p))
		require.NoError(t, err)
		sink := &fanouttest.Sink[item]{Fail: func(string, item, int) error { return errors.New("down") }}
		run := startSink(t, r, sink, nil)
		require.NoError(t, r.Record(item{}))
		synctest.Wait()
		if n := len(sink.Calls()); n != 1 {
			t.Errorf("%d attempts at the same instant; want 1 (the next one at least Sleep=%v later)", n, p.Sleep)
		}
		start := time.Now()
		require.NoError(t, r.Shutdown(context.Background()))
		assert.Equal(t, start, time.Now(), "Shutdown ends the pause at once")
		assert.Len(t, sink.Calls(), 1)
		assert.Equal(t, uint64(1), run.Stats().DroppedShutdown)
	})
}

// The policy's edge cases: MaxTries 1 makes one attempt; Sleep 0 retries at
// once; RandomFirst with Jitter keeps the first pause in
// [0, Sleep×(1+Jitter)) and the later ones in [Sleep, Sleep×(1+Jitter)].
func TestRetryPolicyEdgeCases(t *testing.T) {
	type result struct {
		at []time.Duration // when each attempt was made, from the start
		st fanout.RunnerStats
	}
	run := func(t *testing.T, p fanout.RetryPolicy, values int) result {
		var res result
		synctest.Test(t, func(t *testing.T) {
			r, err := fanout.NewRecorder[item](fanout.WithRetry(p))
			require.NoError(t, err)
			start := time.Now()
			sink := &fanouttest.Sink[item]{Fail: func(_ string, v item, _ int) error { return fmt.Errorf("down %d", v.N) }}
			run := startSink(t, r, sink, nil)
			for i := range values {
				require.NoError(t, r.Record(item{N: i}))
			}
			assert.NoError(t, r.Flush(context.Background()))
			for _, c := range sink.Calls() {
				res.at = append(res.at, c.At.Sub(start))
			}
			res.st = run.Stats()
			assert.NoError(t, r.Shutdown(context.Background()))
		})
		return res
	}
	t.Run("MaxTries=1 makes one attempt", func(t *testing.T) {
		res := run(t, fanout.RetryPolicy{MaxTries: 1, Sleep: time.Hour}, 3)
		if len(res.at) != 3 || res.at[2] != 0 || res.st.DroppedRetries != 3 || res.st.Failures != 3 {
			t.Errorf("attempts at %v, stats %+v", res.at, res.st)
		}
	})
	t.Run("Sleep=0 retries at once", func(t *testing.T) {
		res := run(t, fanout.RetryPolicy{MaxTries: 4, Jitter: 3, RandomFirst: true}, 2)
		if len(res.at) != 8 || res.at[7] != 0 || res.st.DroppedRetries != 2 {
			t.Errorf("attempts at %v, stats %+v", res.at, res.st)
		}
	})
	t.Run("RandomFirst with Jitter keeps pauses in bounds", func(t *testing.T) {
		const sleep, tries = 10 * time.Second, 4
		res := run(t, fanout.RetryPolicy{MaxTries: tries, Sleep: sleep, Jitter: 0.5, RandomFirst: true}, 40)
		if len(res.at) != 40*tries {
			t.Fatalf("%d attempts", len(res.at))
		}
		var firstMin, firstMax time.Duration = math.MaxInt64, 0
		for v := range 40 {
			for k := 1; k < tries; k++ {
				d := res.at[v*tries+k] - res.at[v*tries+k-1]
				lo, hi := sleep, sleep*3/2
				if k == 1 {
					lo = 0
					firstMin, firstMax = min(firstMin, d), max(firstMax, d)
				}
				if d < lo || d > hi || (k == 1 && d == hi) {
					t.Errorf("value %d pause %d = %v, want in [%v, %v]", v, k, d, lo, hi)
				}
			}
		}
		if firstMin > sleep/2 || firstMax < sleep {
			t.Errorf("first pauses span only [%v, %v]: not random over [0, 15s)", firstMin, firstMax)
		}
	})
}

// With MaxSleep the pause doubles after each failure up to MaxSleep, and
// Jitter adds up to that fraction of the current pause, not of Sleep.
func TestRetryPauseDoublesUpToMaxSleepWithJitterOfTheCurrentPause(t *testing.T) {
	p := fanout.RetryPolicy{MaxTries: 10, Sleep: time.Second, MaxSleep: 8 * time.Second, Jitter: 0.5}
	require.NoError(t, p.Validate())
	for tries, base := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 9: 8 * time.Second} {
		for range 20 {
			d := p.Pause(tries)
			assert.GreaterOrEqual(t, d, base, "after %d failures", tries)
			assert.LessOrEqual(t, d, base+base/2, "after %d failures", tries)
		}
	}
	p.MaxSleep = time.Millisecond
	assert.Error(t, p.Validate(), "a MaxSleep below Sleep")
}

// A zero Sleep with a MaxSleep stays zero when doubled: Pause returns it
// at once for any count of failures. It doubled zero once per failure, so
// Pause(math.MaxInt) never returned, and a runner retrying for ever
// (MaxTries math.MaxInt) spent time growing with each failure.
func TestRetryPauseWithAZeroSleepReturnsForAnyFailureCount(t *testing.T) {
	p := fanout.RetryPolicy{MaxTries: math.MaxInt, Sleep: 0, MaxSleep: time.Second}
	require.NoError(t, p.Validate())
	done := make(chan time.Duration, 1)
	go func() { done <- p.Pause(math.MaxInt) }()
	select {
	case d := <-done:
		assert.Zero(t, d)
	case <-time.After(time.Minute):
		t.Fatal("Pause(math.MaxInt) with a zero Sleep and a MaxSleep did not return")
	}
}
