package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// client-go's schedule: after the first failure a random pause in [0, Sleep),
// then Sleep each time; MaxTries attempts in all.
func TestRetryDefaultPolicyFollowsClientGosSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var drops []fanout.Drop
		var mu sync.Mutex
		r := newRecorder(t, fanout.WithRetry(fanout.DefaultRetryPolicy()), fanout.WithDropHandler(func(d fanout.Drop) {
			mu.Lock()
			drops = append(drops, d)
			mu.Unlock()
		}))
		boom := errors.New("connection refused")
		sink := &fanouttest.Sink[ev]{Fail: func(string, ev, int) error { return boom }}
		run, err := r.StartSink(sink, nil)
		require.NoError(t, err)
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
		assert.Equal(t, uint64(1), st.DroppedRetries)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, drops, 1)
		assert.Equal(t, fanout.DropRetries, drops[0].Reason)
		assert.ErrorIs(t, drops[0].Err, boom)
		assert.Equal(t, run.Stats().Received, uint64(1))
	})
}

func TestRetryJitterAddsUpToJitterTimesSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t, fanout.WithRetry(fanout.RetryPolicy{MaxTries: 30, Sleep: 10 * time.Second, Jitter: 0.25}))
		sink := &fanouttest.Sink[ev]{Fail: func(string, ev, int) error { return errors.New("down") }}
		_, err := r.StartSink(sink, nil)
		require.NoError(t, err)
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

func TestRetryUntilAWriteSucceedsOneValueAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t, fastRetry(5))
		sink := &fanouttest.Sink[ev]{
			Key: func(e ev) string { return e.Msg },
			Fail: func(_ string, _ ev, attempt int) error {
				if attempt < 3 {
					return errors.New("flaky")
				}
				return nil
			},
		}
		run, err := r.StartSink(sink, nil)
		require.NoError(t, err)
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

func TestRetryableRejectingAnErrorDropsTheValueAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		invalid := errors.New("invalid")
		r := newRecorder(t, fanout.WithRetry(fanout.RetryPolicy{MaxTries: 12, Sleep: time.Second,
			Retryable: func(err error) bool { return !errors.Is(err, invalid) }}))
		sink := &fanouttest.Sink[ev]{Fail: func(_ string, e ev, _ int) error {
			if e.Msg == "bad" {
				return fmt.Errorf("rejected: %w", invalid)
			}
			return nil
		}}
		run, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "bad"}))
		require.NoError(t, r.Record(ev{Msg: "good"}))
		require.NoError(t, r.Flush(t.Context()))
		assert.Len(t, sink.Calls(), 2, "no retry of a rejected value")
		st := run.Stats()
		assert.Equal(t, uint64(1), st.DroppedRejected)
		assert.Equal(t, uint64(1), st.Written)
	})
}

// TestRetryablePanicDropsTheValueAsRejected: the pipeline contains panics of
// the user functions it calls on a runner goroutine (safeCall around sinks,
// handlers, correlator functions and Observe): "a panicking sink, handler or
// correlator function drops one value instead of the process".
// RetryPolicy.Retryable is such a function, called per failed write on the
// runner goroutine.
//
// Expected: the value is dropped as DropRejected (its error cannot be judged
// retryable) and the runner goes on. Actual: Retryable is called outside
// safeCall (recorder.go:598), so its panic kills the whole process. The same
// holds for the WithDropHandler function and the WithLogger handler, which
// run.drop (recorder.go:556-559) calls on the runner goroutine.
//
// The fix: call Retryable (and report's callbacks on runner goroutines) through
// safeCall.
func TestRetryablePanicDropsTheValueAsRejected(t *testing.T) {
	if inChild(t.Name()) {
		r := newRev(t, fanout.WithRetry(fanout.RetryPolicy{MaxTries: 3, Sleep: time.Millisecond,
			Retryable: func(err error) bool { panic("Retryable bug: " + err.Error()) }}))
		run := must[*fanout.Runner[item]](t)(r.StartSink(funcSink{func(context.Context, string, item) (item, error) {
			return item{}, errors.New("down")
		}}, nil))
		for i := range 2 {
			_ = r.Record(item{N: i})
		}
		if err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		fmt.Println("CONTAINED", run.Stats().DroppedRejected)
		return
	}
	out, err := runChild(t)
	if err != nil || !strings.Contains(out, "CONTAINED 2") {
		t.Errorf("expected both values dropped as DropRejected and the runner alive; the process died: %v\n%s", err, tail(out, 8))
	}
}

// TestRetryPauseSaturatesAtTheLongestDuration: RetryPolicy documents Sleep as the pause
// between attempts and Jitter as an extra of up to Jitter×Sleep; validate
// accepts any non-negative, non-NaN Jitter and any non-negative Sleep.
//
// Expected: either NewRecorder rejects the policy, or no pause is shorter
// than Sleep. Actual: pause (recorder.go:66-75) converts an out-of-range
// float64 to time.Duration (Jitter=+Inf, or Jitter×Sleep > MaxInt64: the
// result is math.MinInt64 on amd64/arm64) and adds durations without
// saturation, so the pause turns negative and the runner retries at once, a
// hot retry loop against a failing server.
//
// The fix: reject Jitter=+Inf in validate and compute the pause in float64,
// clamped to math.MaxInt64.
func TestRetryPauseSaturatesAtTheLongestDuration(t *testing.T) {
	for name, p := range map[string]fanout.RetryPolicy{
		"jitter +Inf":          {MaxTries: 3, Sleep: time.Second, Jitter: math.Inf(1)},
		"huge sleep, jitter 1": {MaxTries: 3, Sleep: math.MaxInt64, Jitter: 1},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, err := fanout.NewRecorder[item](fanout.WithRetry(p))
				if err != nil {
					return // rejected: fine
				}
				var tries atomic.Int32
				_ = must[*fanout.Runner[item]](t)(r.StartSink(funcSink{func(context.Context, string, item) (item, error) {
					tries.Add(1)
					return item{}, errors.New("down")
				}}, nil))
				if err := r.Record(item{}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if n := tries.Load(); n != 1 {
					t.Errorf("%d attempts at the same instant; want 1 (the next one at least Sleep=%v later)", n, p.Sleep)
				}
				_ = r.Shutdown(context.Background())
			})
		})
	}
}

// Retry edge cases: MaxTries 1 makes one attempt; Sleep 0 retries at once;
// RandomFirst with Jitter keeps the first pause in [0, Sleep×(1+Jitter)) and
// the later ones in [Sleep, Sleep×(1+Jitter)].
func TestRetryPolicyEdgeCases(t *testing.T) {
	type result struct {
		at []time.Duration
		st fanout.RunnerStats
	}
	run := func(t *testing.T, p fanout.RetryPolicy, values int) result {
		var res result
		synctest.Test(t, func(t *testing.T) {
			r, err := fanout.NewRecorder[item](fanout.WithRetry(p))
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			start := time.Now()
			run := must[*fanout.Runner[item]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v item) (item, error) {
				mu.Lock()
				defer mu.Unlock()
				res.at = append(res.at, time.Since(start))
				return item{}, fmt.Errorf("down %d", v.N)
			}}, nil))
			for i := range values {
				_ = r.Record(item{N: i})
			}
			if err := r.Flush(context.Background()); err != nil {
				t.Error(err)
			}
			res.st = run.Stats()
			_ = r.Shutdown(context.Background())
		})
		return res
	}
	t.Run("MaxTries=1", func(t *testing.T) {
		res := run(t, fanout.RetryPolicy{MaxTries: 1, Sleep: time.Hour}, 3)
		if len(res.at) != 3 || res.at[2] != 0 || res.st.DroppedRetries != 3 || res.st.Failures != 3 {
			t.Errorf("attempts at %v, stats %+v", res.at, res.st)
		}
	})
	t.Run("Sleep=0", func(t *testing.T) {
		res := run(t, fanout.RetryPolicy{MaxTries: 4, Jitter: 3, RandomFirst: true}, 2)
		if len(res.at) != 8 || res.at[7] != 0 || res.st.DroppedRetries != 2 {
			t.Errorf("attempts at %v, stats %+v", res.at, res.st)
		}
	})
	t.Run("RandomFirst+Jitter", func(t *testing.T) {
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
