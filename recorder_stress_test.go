package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// Record, Flush, Stop, StartSink/StartHandler and several Shutdowns race from
// many goroutines, with a sink that fails, panics, is spam-filtered and
// holds every write until a feeder goroutine lets it through (so that
// writes are in flight when Shutdown's context ends). No race or panic;
// every Record returns nil or ErrStopped; afterwards every runner has exited
// and every value is accounted for exactly:
//   - per runner: Written + drops other than Full == Received;
//   - for runners registered throughout: Received + DroppedFull == Recorded;
//   - the recorder's counters are the sums over its runners;
//   - the drop handler saw exactly the recorder's drop counters.
//
// Flush errors are not checked here (TestFlushReturnsWhenItsRunnerExitsConcurrently
// checks that Flush returns).
func TestRecorderAccountsForEveryValueUnderChurn(t *testing.T) {
	for round := range 3 {
		var reasons [16]atomic.Int64
		r, err := fanout.NewRecorder[item](fanout.WithQueueLength(16),
			fanout.WithRetry(fanout.RetryPolicy{MaxTries: 3, Sleep: 20 * time.Microsecond, Jitter: 1,
				Retryable: func(err error) bool { return !strings.Contains(err.Error(), "fatal") }}),
			fanout.WithDropHandler(func(d fanout.Drop) { reasons[d.Reason].Add(1) }))
		if err != nil {
			t.Fatal(err)
		}
		sink := &fanouttest.Sink[item]{
			Block: make(chan struct{}),
			Panic: func(v item) bool { return v.N%11 == 3 },
			Fail: func(_ string, v item, _ int) error {
				switch v.N % 11 {
				case 1:
					return errors.New("transient")
				case 2:
					return errors.New("fatal")
				}
				return nil
			},
		}
		corr := func() *fanout.Correlator[item] {
			c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[item]{
				Dedup: &fanout.DedupStage[item]{Key: func(v item) string { return fmt.Sprint(v.N % 7) }},
				Spam:  &fanout.SpamStage[item]{Key: func(v item) string { return fmt.Sprint(v.N % 3) }, Burst: 50, Rate: 1000},
			})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		var (
			runnersMu sync.Mutex
			runners   []*fanout.Runner[item]
		)
		add := func(run *fanout.Runner[item], err error) {
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
		stable2, err := r.StartHandler(func(v item) {
			if v.N%13 == 5 {
				panic("handler bug")
			}
		})
		add(stable2, err)

		var wg sync.WaitGroup
		stopping := make(chan struct{})
		wg.Go(func() { // lets the sink's writes through, one at a time
			for {
				select {
				case <-stopping:
					return
				case sink.Block <- struct{}{}:
				}
			}
		})

		var recorded atomic.Uint64
		threshold := uint64(1500 + 1000*round)
		reached := make(chan struct{})     // closed when threshold values are recorded
		progress := make(chan struct{}, 1) // paces the churn by the recording
		var rwg sync.WaitGroup
		for g := range 4 {
			rwg.Go(func() {
				for i := range 1_000_000 {
					if i%8 == 0 {
						runtime.Gosched() // let the runners keep up a little
					}
					err := r.Record(item{N: g*1_000_000 + i})
					switch {
					case err == nil:
						n := recorded.Add(1)
						if n == threshold {
							close(reached)
						}
						if n%64 == 0 {
							select {
							case progress <- struct{}{}:
							default:
							}
						}
					case errors.Is(err, fanout.ErrStopped):
						return
					default:
						t.Errorf("Record: %v", err)
						return
					}
				}
			})
		}
		wg.Go(func() { // churn: start a runner and stop a random one, every 64 values or so
			for i := 0; ; i++ {
				select {
				case <-stopping:
					return
				case <-progress:
				}
				if i%2 == 0 {
					run, err := r.StartSink(sink, corr())
					add(run, err)
				} else {
					run, err := r.StartHandler(func(item) {})
					add(run, err)
				}
				runnersMu.Lock()
				var victim *fanout.Runner[item]
				if len(runners) > 2 {
					victim = runners[2+rand.IntN(len(runners)-2)]
				}
				runnersMu.Unlock()
				if victim != nil {
					victim.Stop()
				}
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
		recordersDone := make(chan struct{})
		go func() { rwg.Wait(); close(recordersDone) }()
		select {
		case <-reached:
		case <-recordersDone:
			t.Fatalf("round %d: the recorders stopped after %d values", round, recorded.Load())
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
		<-recordersDone
		close(stopping)
		wg.Wait()
		for k, err := range shutErr {
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Shutdown %d: %v", k, err)
			}
		}
		if err := r.Record(item{}); !errors.Is(err, fanout.ErrStopped) {
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
