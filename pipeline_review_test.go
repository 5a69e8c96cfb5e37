package fanout_test

// Tests from an adversarial review of the event pipeline (recorder.go,
// correlate.go). TestRegression* tests each reproduce a bug the review found
// (now fixed; the comment says what went wrong and how it was fixed);
// TestPipeline* tests pin down edge cases and concurrency.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
)

// rv is the review's value type.
type rv struct {
	N   int
	Key string
	ID  string
}

func newRev(t *testing.T, opts ...fanout.RecorderOption) *fanout.Recorder[rv] {
	t.Helper()
	r, err := fanout.NewRecorder[rv](opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	return r
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// funcSink is a Sink made of one function for both Create and Update.
type funcSink struct {
	f func(ctx context.Context, op string, v rv) (rv, error)
}

func (s funcSink) Create(ctx context.Context, v rv) (rv, error) { return s.f(ctx, "create", v) }
func (s funcSink) Update(ctx context.Context, v rv) (rv, error) { return s.f(ctx, "update", v) }

// ---------------------------------------------------------------------------
// Flush / runner exit: lost wake-up.

// TestRegressionFlushHangsWhenRunnerExitsConcurrently: Flush must return once
// a runner it waits for has exited ("A runner that has exited counts as
// done").
//
// Before the fix: it can wait forever. Runner.exit (recorder.go:506-512) closes the
// registered waiters under run.mu, releases run.mu and only then closes
// run.done. waitHandled (recorder.go:533-547) checks run.done under run.mu
// and, seeing it still open, registers a waiter. A Flush that took its
// snapshot while the runner was still listed and reaches waitHandled in that
// gap registers a waiter nobody will ever close. The target is out of reach
// whenever values were recorded between Runner.Stop and the runner's exit:
// Record counts them in run.enqueued (recorder.go:174-176, the runner is
// still in r.runners) although its stopped watcher never delivers them.
//
// The fix: close(run.done) before run.mu.Unlock() in exit (or set an "exited"
// flag under run.mu that waitHandled checks).
func TestRegressionFlushHangsWhenRunnerExitsConcurrently(t *testing.T) {
	const iterations = 150
	for i := range iterations {
		r, err := fanout.NewRecorder[rv]()
		if err != nil {
			t.Fatal(err)
		}
		// Runner A blocks on value 2, runner B (registered after A, so each
		// Flush waits for A first) on value 0.
		enteredA, releaseA := make(chan struct{}), make(chan struct{})
		enteredB, releaseB := make(chan struct{}), make(chan struct{})
		_ = must[*fanout.Runner[rv]](t)(r.StartHandler(func(v rv) {
			if v.N == 2 {
				close(enteredA)
				<-releaseA
			}
		}))
		runB := must[*fanout.Runner[rv]](t)(r.StartHandler(func(v rv) {
			if v.N == 0 {
				close(enteredB)
				<-releaseB
			}
		}))
		_ = r.Record(rv{N: 0})
		<-enteredB
		runB.Stop()
		// Recorded after B's Stop, before it exits: counted in B's enqueued
		// count, never delivered, so only B's exit ends a Flush waiting for B.
		_ = r.Record(rv{N: 1})

		var wg sync.WaitGroup
		var stuck atomic.Int32
		flush := func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if r.Flush(ctx) != nil {
				stuck.Add(1)
			}
		}
		// Waiters on B: B's exit holds B's lock a while to close them.
		for range 300 {
			wg.Go(flush)
		}
		time.Sleep(3 * time.Millisecond)
		// Flush calls that snapshot both runners now, wait for A, and move
		// on to B while B is exiting.
		_ = r.Record(rv{N: 2})
		<-enteredA
		for range 200 {
			wg.Go(flush)
		}
		time.Sleep(2 * time.Millisecond)
		close(releaseB)
		close(releaseA)
		<-runB.Done()
		wg.Wait()
		_ = r.Shutdown(context.Background())
		if n := stuck.Load(); n > 0 {
			t.Errorf("iteration %d: %d Flush calls waited until their 3 s deadline although the runner they waited for had exited", i, n)
			return
		}
	}
}

// TestRegressionFlushLeaksWaiterWhenCtxEnds: a Flush that returns ctx.Err()
// has given up and should leave nothing behind.
//
// Before the fix: waitHandled appends a flushWaiter (and a channel) to run.waiters
// (recorder.go:545-553) and does not remove it when ctx ends; it stays until
// the runner reaches the target or exits, and every markHandled scans it
// under run.mu. A health check calling Flush with a timeout while a sink is
// stuck (or a caller polling with an expired ctx) grows the list without
// bound: here 100,000 calls with a cancelled ctx retain megabytes.
//
// The fix: on ctx end, remove the waiter under run.mu (or share one channel per
// target).
func TestRegressionFlushLeaksWaiterWhenCtxEnds(t *testing.T) {
	r := newRev(t)
	entered, release := make(chan struct{}), make(chan struct{})
	_ = must[*fanout.Runner[rv]](t)(r.StartHandler(func(rv) {
		close(entered)
		<-release
	}))
	defer close(release)
	_ = r.Record(rv{})
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for range 100_000 {
		if err := r.Flush(ctx); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	if grown := int64(heap()) - int64(before); grown > 1<<20 {
		t.Errorf("heap grew by %.1f MB after 100,000 Flush calls that all returned context.Canceled", float64(grown)/(1<<20))
	}
}

// ---------------------------------------------------------------------------
// Subprocess helper: for hangs that would leave a goroutine behind forever
// and for crashes, the scenario runs in a child copy of the test binary.

const childEnv = "FANOUT_REVIEW_CHILD"

// inChild reports whether this process is the child for test name.
func inChild(name string) bool { return os.Getenv(childEnv) == name }

// runChild runs test t.Name() in a child process with the child marker set
// and returns its combined output and exit error.
func runChild(t *testing.T) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ---------------------------------------------------------------------------
// Shutdown from inside a runner.

// TestRegressionShutdownFromRunnerNeverReturns: Shutdown is documented as
// "safe from any goroutine" and bounded by its ctx ("waits ... until ctx
// ends; then ... returns ctx.Err()"). A sink that gives up on a fatal error
// by calling Shutdown, or a handler doing so, is a natural use.
//
// Before the fix: called from a sink or handler, Shutdown never returns, even after
// its ctx has ended: after the ctx branch it waits unconditionally for every
// runner's done channel (recorder.go:342-344), including the runner whose
// goroutine is the caller. The runner and the caller are stuck forever (and
// any later Shutdown too).
//
// The fix: do not wait for in-flight calls once ctx has ended (return and let
// Runner.Done report the exit), or detect the caller's own runner (for
// example by handing sinks and handlers a ctx carrying the runner, or
// marking the runner "in handler" and skipping it), and document it.
func TestRegressionShutdownFromRunnerNeverReturns(t *testing.T) {
	if c := os.Getenv(childEnv); strings.HasPrefix(c, t.Name()+"/") {
		shutdownFromRunnerChild(t, strings.TrimPrefix(c, t.Name()+"/"))
		return
	}
	for _, where := range []string{"handler", "sink"} {
		t.Run(where, func(t *testing.T) {
			if os.Getenv(childEnv) != "" {
				return
			}
			out, err := runChild(t)
			if err != nil || !strings.Contains(out, "SHUTDOWN RETURNED") {
				t.Errorf("Shutdown(ctx with a 1 s timeout) called from a %s did not return within an hour "+
					"(synctest time); child: %v\n%s", where, err, tail(out, 6))
			}
		})
	}
}

func shutdownFromRunnerChild(t *testing.T, where string) {
	synctest.Test(t, func(t *testing.T) {
		r, err := fanout.NewRecorder[rv]()
		if err != nil {
			t.Fatal(err)
		}
		res := make(chan error, 1)
		shut := func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			res <- r.Shutdown(ctx)
		}
		if where == "handler" {
			_ = must[*fanout.Runner[rv]](t)(r.StartHandler(func(rv) { shut() }))
		} else {
			_ = must[*fanout.Runner[rv]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v rv) (rv, error) {
				shut()
				return v, errors.New("fatal")
			}}, nil))
		}
		if err := r.Record(rv{}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-res:
			fmt.Println("SHUTDOWN RETURNED", err)
		case <-time.After(time.Hour):
			fmt.Println("SHUTDOWN HUNG")
			os.Exit(3) // the runner goroutine can never be released
		}
	})
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ---------------------------------------------------------------------------
// Panics in RetryPolicy.Retryable.

// TestRegressionRetryablePanicCrashesProcess: the pipeline contains panics of
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
func TestRegressionRetryablePanicCrashesProcess(t *testing.T) {
	if inChild(t.Name()) {
		r := newRev(t, fanout.WithRetry(fanout.RetryPolicy{MaxTries: 3, Sleep: time.Millisecond,
			Retryable: func(err error) bool { panic("Retryable bug: " + err.Error()) }}))
		run := must[*fanout.Runner[rv]](t)(r.StartSink(funcSink{func(context.Context, string, rv) (rv, error) {
			return rv{}, errors.New("down")
		}}, nil))
		for i := range 2 {
			_ = r.Record(rv{N: i})
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

// ---------------------------------------------------------------------------
// Retry pauses.

// TestRegressionRetryPauseOverflow: RetryPolicy documents Sleep as the pause
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
func TestRegressionRetryPauseOverflow(t *testing.T) {
	for name, p := range map[string]fanout.RetryPolicy{
		"jitter +Inf":          {MaxTries: 3, Sleep: time.Second, Jitter: math.Inf(1)},
		"huge sleep, jitter 1": {MaxTries: 3, Sleep: math.MaxInt64, Jitter: 1},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, err := fanout.NewRecorder[rv](fanout.WithRetry(p))
				if err != nil {
					return // rejected: fine
				}
				var tries atomic.Int32
				_ = must[*fanout.Runner[rv]](t)(r.StartSink(funcSink{func(context.Context, string, rv) (rv, error) {
					tries.Add(1)
					return rv{}, errors.New("down")
				}}, nil))
				if err := r.Record(rv{}); err != nil {
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

// ---------------------------------------------------------------------------
// Huge queue length.

// TestRegressionHugeQueueLength: WithQueueLength documents only negative
// lengths as errors (NewRecorder returns one).
//
// Actual, for absurd but non-negative lengths:
//   - n > 1<<62: NewRecorder never returns. New (fanout.go:109-112) doubles
//     ringCap until it reaches n; the int overflows to a negative number and
//     then 0, and 0<<1 stays 0: an endless loop.
//   - n = 1<<45: NewRecorder succeeds, then StartSink panics with
//     "makechan: size out of range": the runner's channel of n values is
//     allocated at once (watcher.go:70) and the panic is not turned into an
//     error.
//
// The fix: bound the queue length in config.validate (for example by what a
// channel of T can hold, or a documented maximum) and stop the ringCap loop
// at a maximum.
func TestRegressionHugeQueueLength(t *testing.T) {
	if inChild(t.Name() + "/NewRecorder") {
		done := make(chan error, 1)
		go func() {
			_, err := fanout.NewRecorder[rv](fanout.WithQueueLength(math.MaxInt))
			done <- err
		}()
		select {
		case err := <-done:
			fmt.Println("RETURNED", err)
		case <-time.After(3 * time.Second):
			fmt.Println("HUNG")
			os.Exit(3) // the goroutine spins forever
		}
		return
	}
	t.Run("NewRecorder", func(t *testing.T) {
		if os.Getenv(childEnv) != "" {
			return
		}
		out, err := runChild(t)
		if err != nil || !strings.Contains(out, "RETURNED") {
			t.Errorf("NewRecorder(WithQueueLength(math.MaxInt)) did not return in 3 s: %v\n%s", err, tail(out, 4))
		}
	})
	t.Run("StartSink", func(t *testing.T) {
		if os.Getenv(childEnv) != "" {
			return
		}
		r, err := fanout.NewRecorder[rv](fanout.WithQueueLength(1 << 45))
		if err != nil {
			return // rejected: fine
		}
		defer r.Shutdown(context.Background())
		var perr any
		func() {
			defer func() { perr = recover() }()
			run, err := r.StartHandler(func(rv) {})
			if err == nil {
				run.Stop()
			}
		}()
		if perr != nil {
			t.Errorf("StartHandler panicked instead of returning an error: %v", perr)
		}
	})
}

// ---------------------------------------------------------------------------
// Hand-off plain watcher that waits.

// A plain watcher with queue length 0 (hand-off) that waits when full cannot
// make Record wait: it misses each value its reader is not already waiting
// for, counted in its own stats (documented on Recorder.Watch).
func TestPipelineHandOffPlainWatcherMisses(t *testing.T) {
	r := newRev(t, fanout.WithQueueLength(0))
	w := must[*fanout.Watcher[rv]](t)(r.Watch(fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull)))
	defer w.Stop()
	require.NoError(t, r.Record(rv{N: 1})) // nobody is receiving from w
	assert.Equal(t, uint64(1), w.Stats().DroppedFull)
	assert.Equal(t, uint64(1), r.Stats().Recorded)
}

// Queue length 0 is a hand-off: a runner gets a value only while it waits in
// its receive; a busy runner misses it as DropFull. Accounting stays exact
// and Flush does not wait for missed values.
func TestPipelineHandOffQueueZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var full atomic.Int32
		r := newRev(t, fanout.WithQueueLength(0), fanout.WithDropHandler(func(d fanout.Drop) {
			if d.Reason == fanout.DropFull {
				full.Add(1)
			}
		}))
		block := make(chan struct{})
		var got []int
		h := must[*fanout.Runner[rv]](t)(r.StartHandler(func(v rv) {
			if v.N < 0 {
				<-block
			}
			got = append(got, v.N)
		}))
		var created atomic.Int32
		s := must[*fanout.Runner[rv]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v rv) (rv, error) {
			created.Add(1)
			return v, nil
		}}, nil))
		synctest.Wait() // both runners wait in their receive
		for i := range 5 {
			if err := r.Record(rv{N: i}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		if err := r.Record(rv{N: -1}); err != nil { // the handler blocks on it
			t.Fatal(err)
		}
		synctest.Wait()
		for i := range 3 {
			if err := r.Record(rv{N: 10 + i}); err != nil { // the handler is busy: missed
				t.Fatal(err)
			}
			synctest.Wait()
		}
		if st := h.Stats(); st.Queued != 0 || st.DroppedFull != 3 || st.Received != 6 {
			t.Errorf("handler stats %+v: want nothing queued, 3 missed, 6 received", st)
		}
		done := make(chan error, 1)
		go func() { done <- r.Flush(context.Background()) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Flush returned while the handler still held a value")
		default:
		}
		close(block)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if want := []int{0, 1, 2, 3, 4, -1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("handler got %v, want %v", got, want)
		}
		if c := created.Load(); c != 9 {
			t.Errorf("sink created %d values, want 9 (it kept up)", c)
		}
		st := r.Stats()
		if st.Recorded != 9 || st.DroppedFull != 3 || full.Load() != 3 || st.Written != 6+9 {
			t.Errorf("recorder stats %+v, DropFull reports %d", st, full.Load())
		}
		for _, run := range []*fanout.Runner[rv]{h, s} {
			st := run.Stats()
			if st.Received+st.DroppedFull != 9 || st.Written+st.Dropped-st.DroppedFull != st.Received {
				t.Errorf("runner accounting not exact: %+v", st)
			}
		}
	})
}

// Flush called from inside a handler waits for its own runner, which cannot
// finish the value in hand until the handler returns: it returns only when
// its ctx ends (with context.Background() it never returns). Flush from a
// handler for another runner's values works. Not documented; see the report.
func TestPipelineFlushFromHandlerWaitsForItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRev(t)
		res := make(chan error, 1)
		var waited time.Duration
		var other atomic.Int32
		_ = must[*fanout.Runner[rv]](t)(r.StartHandler(func(rv) { other.Add(1) }))
		_ = must[*fanout.Runner[rv]](t)(r.StartHandler(func(v rv) {
			if v.N != 1 {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			err := r.Flush(ctx)
			waited = time.Since(start)
			res <- err
		}))
		_ = r.Record(rv{N: 1})
		if err := <-res; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Flush from a handler = %v, want DeadlineExceeded (it waits for itself)", err)
		}
		if waited != time.Minute {
			t.Errorf("waited %v, want the whole ctx (1m)", waited)
		}
		if other.Load() != 1 {
			t.Errorf("the other runner handled %d values, want 1", other.Load())
		}
	})
}

// Record and StartHandler called from inside a handler and a sink work (the
// recorder is not held while runners run), and the recorded values reach
// the other runners; Flush from outside then sees all of them.
func TestPipelineRecordFromHandlerAndSink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRev(t)
		var seen sync.Map
		var extra *fanout.Runner[rv]
		_ = must[*fanout.Runner[rv]](t)(r.StartHandler(func(v rv) {
			if v.N < 3 {
				if err := r.Record(rv{N: v.N + 1, Key: "from handler"}); err != nil {
					t.Error(err)
				}
			}
			if v.N == 0 && extra == nil {
				extra = must[*fanout.Runner[rv]](t)(r.StartHandler(func(v rv) { seen.Store(fmt.Sprint("extra ", v.N, v.Key), true) }))
			}
		}))
		_ = must[*fanout.Runner[rv]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v rv) (rv, error) {
			seen.Store(fmt.Sprint("sink ", v.N, v.Key), true)
			if v.Key == "" && v.N == 0 {
				if err := r.Record(rv{N: 100, Key: "from sink"}); err != nil {
					t.Error(err)
				}
			}
			return v, nil
		}}, nil))
		if err := r.Record(rv{N: 0}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"sink 0", "sink 1from handler", "sink 3from handler", "sink 100from sink", "extra 3from handler"} {
			if _, ok := seen.Load(k); !ok {
				t.Errorf("missing %q", k)
			}
		}
		if st := r.Stats(); st.Recorded != 5 || st.Dropped != 0 {
			t.Errorf("stats %+v: want 5 recorded, none dropped", st)
		}
	})
}

// After Shutdown starts nothing is retried: a value in its retry pause is
// dropped at once, and each queued value gets exactly one attempt although
// the sink keeps failing. With MaxTries 1 the reason is DropRetries, else
// DropShutdown. Shutdown takes no (synctest) time.
func TestPipelineShutdownWithFailingSinkOneAttemptEach(t *testing.T) {
	for _, tries := range []int{1, 5} {
		t.Run(fmt.Sprint("MaxTries=", tries), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, err := fanout.NewRecorder[rv](fanout.WithRetry(fanout.RetryPolicy{MaxTries: tries, Sleep: 10 * time.Second}))
				if err != nil {
					t.Fatal(err)
				}
				block := make(chan struct{})
				var mu sync.Mutex
				attempts := map[int]int{}
				run := must[*fanout.Runner[rv]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v rv) (rv, error) {
					if v.N == 0 {
						<-block
					}
					mu.Lock()
					attempts[v.N]++
					mu.Unlock()
					return rv{}, errors.New("down")
				}}, nil))
				for i := range 4 {
					if err := r.Record(rv{N: i}); err != nil {
						t.Fatal(err)
					}
				}
				close(block)
				time.Sleep(15 * time.Second) // value 0: 2 attempts if retried, then pausing
				synctest.Wait()
				before := map[int]int{}
				mu.Lock()
				for k, v := range attempts {
					before[k] = v
				}
				mu.Unlock()
				start := time.Now()
				if err := r.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("Shutdown took %v", d)
				}
				mu.Lock()
				defer mu.Unlock()
				if attempts[0] != before[0] {
					t.Errorf("value 0 retried after Shutdown: %d attempts, %d before", attempts[0], before[0])
				}
				for i := 1; i < 4; i++ {
					if attempts[i]-before[i] > 1 {
						t.Errorf("value %d: %d attempts after Shutdown began", i, attempts[i]-before[i])
					}
				}
				st := run.Stats()
				want := st.DroppedShutdown
				if tries == 1 {
					want = st.DroppedRetries
				}
				if want != 4 || st.Dropped != 4 || st.Received != 4 || st.Written != 0 {
					t.Errorf("stats %+v", st)
				}
			})
		})
	}
}

// Flush waiting for a runner that is stopped meanwhile returns once the
// runner has given the queued values their one attempt and exited; the
// other runner goes on and is flushed too.
func TestPipelineStopDuringFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRev(t, fanout.WithRetry(fanout.RetryPolicy{MaxTries: 3, Sleep: time.Hour}))
		block := make(chan struct{})
		var written atomic.Int32
		run := must[*fanout.Runner[rv]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v rv) (rv, error) {
			if v.N == 0 {
				<-block
				return rv{}, errors.New("failed once")
			}
			written.Add(1)
			return v, nil
		}}, nil))
		var handled atomic.Int32
		_ = must[*fanout.Runner[rv]](t)(r.StartHandler(func(rv) { handled.Add(1) }))
		for i := range 3 {
			_ = r.Record(rv{N: i})
		}
		done := make(chan error, 1)
		go func() { done <- r.Flush(context.Background()) }()
		synctest.Wait()
		run.Stop()
		go run.Stop()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Flush returned while a write was in flight")
		default:
		}
		close(block)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		<-run.Done()
		st := run.Stats()
		if st.Written != 2 || st.DroppedShutdown != 1 || written.Load() != 2 {
			t.Errorf("stats %+v: want the failed value dropped at once (no retry after Stop), the 2 queued written", st)
		}
		_ = r.Record(rv{N: 9})
		if err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if handled.Load() != 4 {
			t.Errorf("other runner handled %d, want 4", handled.Load())
		}
	})
}

// Panics in correlator functions drop the value as DropRejected and the
// runner goes on; a panic in Observe (after the write) loses nothing.
func TestPipelineCorrelatorPanicsContained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[rv]{
			Dedup: &fanout.DedupStage[rv]{
				Key: func(v rv) string {
					if v.Key == "bad key" {
						panic("key bug")
					}
					return v.Key
				},
				Count: func(v rv) int {
					if v.ID == "stored-bad" {
						panic("count bug") // only Observe sees stored values
					}
					return 1
				},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		var rejected atomic.Int32
		r := newRev(t, fanout.WithDropHandler(func(d fanout.Drop) {
			if d.Reason == fanout.DropRejected && d.Err != nil && strings.Contains(d.Err.Error(), "key bug") {
				rejected.Add(1)
			}
		}))
		run := must[*fanout.Runner[rv]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v rv) (rv, error) {
			if v.Key == "observe" {
				v.ID = "stored-bad"
			}
			return v, nil
		}}, c))
		for _, k := range []string{"a", "bad key", "observe", "b"} {
			_ = r.Record(rv{Key: k})
		}
		if err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := run.Stats()
		if st.Written != 3 || st.DroppedRejected != 1 || rejected.Load() != 1 {
			t.Errorf("stats %+v, rejected reports %d", st, rejected.Load())
		}
	})
}

// Retry edge cases: MaxTries 1 makes one attempt; Sleep 0 retries at once;
// RandomFirst with Jitter keeps the first pause in [0, Sleep×(1+Jitter)) and
// the later ones in [Sleep, Sleep×(1+Jitter)].
func TestPipelineRetryEdgeCases(t *testing.T) {
	type result struct {
		at []time.Duration
		st fanout.RunnerStats
	}
	run := func(t *testing.T, p fanout.RetryPolicy, values int) result {
		var res result
		synctest.Test(t, func(t *testing.T) {
			r, err := fanout.NewRecorder[rv](fanout.WithRetry(p))
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			start := time.Now()
			run := must[*fanout.Runner[rv]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v rv) (rv, error) {
				mu.Lock()
				defer mu.Unlock()
				res.at = append(res.at, time.Since(start))
				return rv{}, fmt.Errorf("down %d", v.N)
			}}, nil))
			for i := range values {
				_ = r.Record(rv{N: i})
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

// Only one goroutine per runner, however many values are queued or retrying.
func TestPipelineGoroutinesBoundedByRunners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := fanout.NewRecorder[rv](fanout.WithRetry(fanout.DefaultRetryPolicy()))
		if err != nil {
			t.Fatal(err)
		}
		failing := funcSink{func(context.Context, string, rv) (rv, error) { return rv{}, errors.New("down") }}
		_ = must[*fanout.Runner[rv]](t)(r.StartSink(failing, nil))
		_ = must[*fanout.Runner[rv]](t)(r.StartSlog(slog.New(slog.DiscardHandler), slog.LevelInfo, "v", nil))
		_ = must[*fanout.Runner[rv]](t)(r.StartHandler(func(rv) {}))
		for i := range 2000 {
			_ = r.Record(rv{N: i})
		}
		for range 3 {
			synctest.Wait()
			if n := pipelineGoroutines(); n != 3 {
				t.Errorf("%d pipeline goroutines for 3 runners", n)
			}
			time.Sleep(7 * time.Second)
		}
		if err := r.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // a runner closes Done just before its goroutine returns
		if n := pipelineGoroutines(); n != 0 {
			t.Errorf("%d pipeline goroutines left after Shutdown", n)
		}
	})
}

// nil contexts mean no deadline.
func TestPipelineNilContexts(t *testing.T) {
	r := newRev(t)
	_ = must[*fanout.Runner[rv]](t)(r.StartHandler(func(rv) {}))
	_ = r.Record(rv{})
	//lint:ignore SA1012 nil is documented to mean no deadline
	if err := r.Flush(nil); err != nil { //nolint:staticcheck
		t.Fatal(err)
	}
	//lint:ignore SA1012 nil is documented to mean no deadline
	if err := r.Shutdown(nil); err != nil { //nolint:staticcheck
		t.Fatal(err)
	}
}

// Record, Flush, Stop, StartSink/StartHandler and several Shutdowns race from
// many goroutines, with a sink that fails, panics and is spam-filtered. No
// race or panic; every Record returns nil or ErrStopped; afterwards every
// runner has exited and every value is accounted for exactly:
//   - per runner: Written + drops other than Full == Received;
//   - for runners registered throughout: Received + DroppedFull == Recorded;
//   - the drop handler saw exactly the recorder's drop counters.
//
// Flush errors are not checked here (see
// TestRegressionFlushHangsWhenRunnerExitsConcurrently).
func TestPipelineConcurrentChaos(t *testing.T) {
	for round := range 3 {
		var reasons [16]atomic.Int64
		r, err := fanout.NewRecorder[rv](fanout.WithQueueLength(16),
			fanout.WithRetry(fanout.RetryPolicy{MaxTries: 3, Sleep: 20 * time.Microsecond, Jitter: 1,
				Retryable: func(err error) bool { return !strings.Contains(err.Error(), "fatal") }}),
			fanout.WithDropHandler(func(d fanout.Drop) { reasons[d.Reason].Add(1) }))
		if err != nil {
			t.Fatal(err)
		}
		sink := funcSink{func(ctx context.Context, _ string, v rv) (rv, error) {
			switch v.N % 11 {
			case 1:
				return rv{}, errors.New("transient")
			case 2:
				return rv{}, errors.New("fatal")
			case 3:
				panic("sink bug")
			case 4:
				select {
				case <-ctx.Done():
					return rv{}, ctx.Err()
				case <-time.After(20 * time.Microsecond):
				}
			}
			return v, nil
		}}
		corr := func() *fanout.Correlator[rv] {
			c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[rv]{
				Dedup: &fanout.DedupStage[rv]{Key: func(v rv) string { return fmt.Sprint(v.N % 7) }},
				Spam:  &fanout.SpamStage[rv]{Key: func(v rv) string { return fmt.Sprint(v.N % 3) }, Burst: 50, Rate: 1000},
			})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		var (
			runnersMu sync.Mutex
			runners   []*fanout.Runner[rv]
		)
		add := func(run *fanout.Runner[rv], err error) {
			if err != nil {
				if !errors.Is(err, fanout.ErrStopped) {
					t.Error(err)
				}
				return
			}
			runnersMu.Lock()
			runners = append(runners, run)
			runnersMu.Unlock()
		}
		stable1, err := r.StartSink(sink, corr())
		add(stable1, err)
		stable2, err := r.StartHandler(func(v rv) {
			if v.N%13 == 5 {
				panic("handler bug")
			}
		})
		add(stable2, err)

		var recorded atomic.Uint64
		var wg sync.WaitGroup
		stopping := make(chan struct{})
		for g := range 4 {
			wg.Go(func() {
				for i := range 1_000_000 {
					if i%8 == 0 {
						runtime.Gosched() // let the runners keep up a little
					}
					err := r.Record(rv{N: g*1_000_000 + i})
					switch {
					case err == nil:
						recorded.Add(1)
					case errors.Is(err, fanout.ErrStopped):
						return
					default:
						t.Errorf("Record: %v", err)
						return
					}
				}
			})
		}
		wg.Go(func() { // churn
			for i := 0; ; i++ {
				select {
				case <-stopping:
					return
				default:
				}
				if i%2 == 0 {
					run, err := r.StartSink(sink, corr())
					add(run, err)
				} else {
					run, err := r.StartHandler(func(rv) {})
					add(run, err)
				}
				runnersMu.Lock()
				var victim *fanout.Runner[rv]
				if len(runners) > 2 {
					victim = runners[2+rand.IntN(len(runners)-2)]
				}
				runnersMu.Unlock()
				if victim != nil {
					victim.Stop()
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stopping:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					_ = r.Flush(ctx)
					cancel()
					_ = r.Stats()
				}
			})
		}
		// Shut down while the recorders are still going.
		for recorded.Load() < uint64(1500+1000*round) {
			time.Sleep(100 * time.Microsecond)
		}
		var shutErr [3]error
		var sg sync.WaitGroup
		for k := range 3 {
			sg.Go(func() {
				ctx := context.Background()
				if k == 0 && round == 2 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, 100*time.Microsecond)
					defer cancel()
				}
				shutErr[k] = r.Shutdown(ctx)
			})
		}
		sg.Wait()
		close(stopping)
		wg.Wait()
		for k, err := range shutErr {
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Shutdown %d: %v", k, err)
			}
		}
		if err := r.Record(rv{}); !errors.Is(err, fanout.ErrStopped) {
			t.Errorf("Record after Shutdown: %v", err)
		}

		var sum fanout.RunnerStats
		for i, run := range runners {
			select {
			case <-run.Done():
			default:
				t.Fatalf("round %d: runner %d still running after Shutdown", round, i)
			}
			run.Stop() // after exit: no-op
			st := run.Stats()
			if st.Written+st.Dropped-st.DroppedFull != st.Received || st.Queued != 0 {
				t.Errorf("round %d runner %d: %+v: written+dropped != received", round, i, st)
			}
			if i < 2 && st.Received+st.DroppedFull != recorded.Load() {
				t.Errorf("round %d runner %d (registered throughout): received %d + full %d != recorded %d",
					round, i, st.Received, st.DroppedFull, recorded.Load())
			}
			sum.Written += st.Written
			sum.Received += st.Received
			sum.DroppedFull += st.DroppedFull
			sum.DroppedSpam += st.DroppedSpam
			sum.DroppedRejected += st.DroppedRejected
			sum.DroppedRetries += st.DroppedRetries
			sum.DroppedShutdown += st.DroppedShutdown
		}
		tot := r.Stats()
		if tot.Recorded != recorded.Load() || tot.Runners != 0 || tot.Refused != 0 ||
			tot.Written != sum.Written || tot.Received != sum.Received || tot.DroppedFull != sum.DroppedFull ||
			tot.DroppedSpam != sum.DroppedSpam || tot.DroppedRejected != sum.DroppedRejected ||
			tot.DroppedRetries != sum.DroppedRetries || tot.DroppedShutdown != sum.DroppedShutdown {
			t.Errorf("round %d: recorder stats %+v != sum over runners %+v (recorded %d)", round, tot, sum, recorded.Load())
		}
		for reason, n := range map[fanout.DropReason]uint64{
			fanout.DropFull: tot.DroppedFull, fanout.DropSpam: tot.DroppedSpam, fanout.DropRejected: tot.DroppedRejected,
			fanout.DropRetries: tot.DroppedRetries, fanout.DropShutdown: tot.DroppedShutdown,
		} {
			if got := uint64(reasons[reason].Load()); got != n {
				t.Errorf("round %d: drop handler saw %d %v drops, stats say %d", round, got, reason, n)
			}
		}
		if tot.DroppedRejected == 0 || tot.DroppedRetries == 0 || tot.Written == 0 {
			t.Logf("round %d: weak coverage: %+v", round, tot)
		}
	}
}

// pipelineGoroutines counts the goroutines running code of package fanout
// (not its tests); the caller is not one of them.
func pipelineGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/fanout-go/fanout.(") {
			n++
		}
	}
	return n
}
