package exporter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanout-go/fanout"
)

func publishN(t *testing.T, p *Pipeline, n int) []string {
	t.Helper()
	var keys []string
	for i := range n {
		o := occ(fmt.Sprintf("u%d", i), 1, "default")
		if err := p.Occurred(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key())
	}
	return keys
}

func TestEveryOccurrenceReachesEverySinkOnceInOrder(t *testing.T) {
	a, b := &memSink{}, &memSink{}
	p, err := NewPipeline(testConfig(t, a, b), PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := publishN(t, p, 500)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*memSink{a, b} {
		if got := s.stored(); !slices.Equal(got, want) {
			t.Errorf("sink %d stored %d occurrences, want the %d published in order", i, len(got), len(want))
		}
		if !s.closed {
			t.Errorf("sink %d not closed by Shutdown", i)
		}
	}
	for _, st := range p.Stats() {
		if st.Sent != 500 || dropped(st) != 0 {
			t.Errorf("%s: sent %d, dropped %v; want 500 sent, none dropped", st.Name, st.Sent, st.Dropped)
		}
	}
}

func TestFailingSinkIsRetriedUntilItRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failures := 0
		s := &memSink{fail: func(batch []*Occurrence) (int, error) {
			if failures < 5 {
				failures++
				return 0, errDown
			}
			return len(batch), nil
		}}
		p, err := NewPipeline(testConfig(t, s), PipelineOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := publishN(t, p, 40)
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := s.stored(); !slices.Equal(got, want) {
			t.Errorf("stored %v, want %v", got, want)
		}
		if st := p.Stats()[0]; st.Retries != 5 {
			t.Errorf("retries = %d, want 5", st.Retries)
		}
	})
}

func TestShortWriteIsResumedWhereItStopped(t *testing.T) {
	s := &memSink{fail: func(batch []*Occurrence) (int, error) { return 1, nil }}
	p, err := NewPipeline(testConfig(t, s), PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := publishN(t, p, 30)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.stored(); !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
}

func TestPermanentErrorAndPanicDropOnlyTheOccurrenceConcerned(t *testing.T) {
	s := &memSink{fail: func(batch []*Occurrence) (int, error) {
		for i, o := range batch {
			switch o.UID {
			case "u3":
				return i, Permanent(fmt.Errorf("too large"))
			case "u7":
				if i == 0 {
					panic("sink bug")
				}
				return i, nil
			}
		}
		return len(batch), nil
	}}
	p, err := NewPipeline(testConfig(t, s), PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all := publishN(t, p, 10)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := slices.DeleteFunc(slices.Clone(all), func(k string) bool { return k == "u3/1" || k == "u7/1" })
	if got := s.stored(); !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
	st := p.Stats()[0]
	if st.Dropped[DropRejected] != 1 || st.Dropped[DropPanic] != 1 {
		t.Errorf("dropped %v, want one rejected and one panic", st.Dropped)
	}
}

func TestRetriesExhaustedDropsTheBatchAndCountsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		s := &memSink{fail: func([]*Occurrence) (int, error) { calls++; return 0, errDown }}
		c := testConfig(t, s)
		c.Receivers[0].Retry.MaxTries = 3
		p, err := NewPipeline(c, PipelineOptions{})
		if err != nil {
			t.Fatal(err)
		}
		publishN(t, p, 8)
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := p.Stats()[0]
		// The batches are what was queued when the runner looked (up to
		// 4): each got 3 tries, 2 of them retries.
		if st.Dropped[DropRetries] != 8 || st.Sent != 0 || calls%3 != 0 || st.Retries != uint64(calls/3*2) {
			t.Errorf("sent %d, %d calls, retries %d, dropped %v; want 8 dropped after 3 tries per batch", st.Sent, calls, st.Retries, st.Dropped)
		}
	})
}

func TestDropOldestSinkDoesNotSlowTheOthersAndCountsItsDrops(t *testing.T) {
	fast, stuck := &memSink{target: 1000, reached: make(chan struct{})}, &memSink{gate: make(chan struct{})}
	c := testConfig(t, fast, stuck)
	c.Receivers[1].Queue = Queue{Length: 8, Strategy: StrategyDropOldest}
	p, err := NewPipeline(c, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := publishN(t, p, 1000) // returns although stuck never writes
	<-fast.reached
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no time to flush: the stuck sink gives up at once
	if err := p.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v, want nil: only the lossy sink had occurrences unwritten", err)
	}
	if got := fast.stored(); !slices.Equal(got, want) {
		t.Errorf("fast sink stored %d, want all %d", len(got), len(want))
	}
	st := p.Stats()[1]
	if st.Dropped[fanout.DropOldest] < 1000-8-4 {
		t.Errorf("stuck sink: queue_oldest drops %d, want at least %d", st.Dropped[fanout.DropOldest], 1000-8-4)
	}
	var total uint64
	for _, d := range st.Dropped {
		total += d
	}
	if total+st.Sent != 1000 {
		t.Errorf("stuck sink: sent %d + dropped %v != 1000 published", st.Sent, st.Dropped)
	}
}

// shutdownStuck publishes 50 occurrences, one per batch, to a sink with
// the strategy that never writes, and returns its stats, what was logged,
// and Shutdown's error after its deadline.
func shutdownStuck(t *testing.T, strategy Strategy) (SinkStats, string, error) {
	s := &memSink{gate: make(chan struct{})}
	c := testConfig(t, s)
	c.Receivers[0].Queue.Length = 100
	c.Receivers[0].Queue.Strategy = strategy
	c.Receivers[0].Batch = 1
	var logged bytes.Buffer
	p, err := NewPipeline(c, PipelineOptions{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, p, 50)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = p.Shutdown(ctx)
	return p.Stats()[0], logged.String(), err
}

// The occurrences a lossless sink left at the shutdown deadline are
// counted, and the error Shutdown returns says so once: no log line per
// occurrence (a lossy sink's get one warning).
func TestShutdownDeadlineWithALosslessSinkUnfinishedIsAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, logged, err := shutdownStuck(t, StrategyWait)
		if err == nil {
			t.Error("Shutdown returned nil with 50 occurrences of a Wait sink unwritten")
		}
		if st.Dropped[DropShutdown] != 50 {
			t.Errorf("dropped %v, want 50 at shutdown", st.Dropped)
		}
		if n := strings.Count(logged, "\n"); n > 1 {
			t.Errorf("%d log lines about drops at the shutdown deadline, want one at most:\n%s", n, logged)
		}
	})
}

func TestShutdownDeadlineWithOnlyALossySinkUnfinishedCountsItsDropsWithoutError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, logged, err := shutdownStuck(t, StrategyDropOldest)
		if err != nil {
			t.Errorf("Shutdown: %v, want nil: a lossy sink's drops are counted, not an error", err)
		}
		if st.Dropped[DropShutdown] != 50 {
			t.Errorf("dropped %v, want 50 at shutdown", st.Dropped)
		}
		if n := strings.Count(logged, "\n"); n > 1 {
			t.Errorf("%d log lines about drops at the shutdown deadline, want one at most:\n%s", n, logged)
		}
	})
}

func TestGoroutinesAreBoundedBySinksNotEvents(t *testing.T) {
	before := runtime.NumGoroutine()
	fast, slow, stuck := &memSink{}, &memSink{fail: func(b []*Occurrence) (int, error) { return 1, nil }}, &memSink{gate: make(chan struct{})}
	c := testConfig(t, fast, slow, stuck)
	c.Receivers[2].Queue = Queue{Length: 8, Strategy: StrategyDropOldest}
	p, err := NewPipeline(c, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	peak := 0
	for i := range 3_000 {
		if err := p.Occurred(context.Background(), occ(fmt.Sprintf("u%d", i), 1, "ns")); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			peak = max(peak, runtime.NumGoroutine())
		}
	}
	// One goroutine per sink and the checkpoint goroutine, whatever the
	// number of occurrences (a goroutine per occurrence would be
	// thousands), plus a little slack for goroutines that come and go
	// outside the pipeline, such as a logger's flush daemon (one more than
	// the pipeline's was seen once, under load).
	const slack = 3
	if grown := peak - before; grown > 3+1+slack {
		t.Errorf("goroutines grew by %d with 3,000 occurrences and 3 sinks, want at most %d", grown, 3+1+slack)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = p.Shutdown(ctx)
}

// dropped returns the sink's drops, all reasons together.
func dropped(st SinkStats) uint64 {
	var n uint64
	for _, d := range st.Dropped {
		n += d
	}
	return n
}

// enteredWriter signals each Write it is given on entered, before passing
// it on to w.
type enteredWriter struct {
	w       io.Writer
	entered chan struct{}
}

func (e *enteredWriter) Write(b []byte) (int, error) {
	e.entered <- struct{}{}
	return e.w.Write(b)
}

// A stdout (or pipe, or /dev/stdout file) receiver whose stream is
// stalled blocks in write(2), which no context cancels. Shutdown waited
// for that write forever: no last checkpoint, no exit. It now abandons the
// sink shortly after the deadline, writes the checkpoint with only what
// was written (not the stuck write's occurrence), counts the sink, and
// returns the error of an unfinished Wait sink.
func TestShutdownAbandonsASinkStuckInAWriteAfterTheDeadline(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	out := &enteredWriter{w: w, entered: make(chan struct{}, 2)}
	c := &Config{Receivers: []*Receiver{{Name: "out", Sink: &WriterSink{W: out}, Queue: Queue{Length: 16}, Batch: 1}}}
	c.Route.Match = []*Rule{{Receiver: ReceiverRef{Name: "out"}}}
	if p := c.validate(); len(p) > 0 {
		t.Fatal(p)
	}
	store := FileStore{Path: filepath.Join(t.TempDir(), "ck.json")}
	p, err := NewPipeline(c, PipelineOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	big := occ("big", 1, "ns")
	big.Message = string(make([]byte, 1<<20)) // more than the pipe holds: the write blocks
	for _, o := range []*Occurrence{occ("small", 1, "ns"), big} {
		if err := p.Occurred(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		<-out.entered
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(ctx) }()
	select {
	case err = <-done:
	case <-time.After(shutdownGrace + 5*time.Second):
		r.Close() // unblock the write so that the test can end
		<-done
		t.Fatal("Shutdown still waiting for a write stuck on a stalled pipe, long after its deadline")
	}
	r.Close() // the abandoned write fails now, and its goroutine exits
	<-p.runners[0].done()
	if err == nil || !strings.Contains(err.Error(), "abandoned") {
		t.Errorf("shutdown: %v; want the error of an abandoned Wait sink", err)
	}
	if n := p.PipelineStats().SinksAbandoned; n != 1 {
		t.Errorf("%d sinks abandoned, want 1", n)
	}
	ck, err := store.Load(t.Context())
	if err != nil || ck == nil {
		t.Fatalf("checkpoint %v, %v", ck, err)
	}
	if _, ok := ck.Counts["big"]; ok || ck.Counts["small"] != 1 {
		t.Errorf("checkpoint counts %v: want small, written, and not big, whose write was stuck", ck.Counts)
	}
}

// An occurrence a Wait sink was still retrying at the shutdown deadline is
// not covered by the last checkpoint, so that a restart writes it: its
// batch was marked finished once dropped at shutdown, which moved the
// checkpoint past it.
func TestCheckpointAtTheDeadlineLeavesOutWhatASinkWasRetrying(t *testing.T) {
	retrying := make(chan struct{})
	var once sync.Once
	s := &memSink{fail: func(b []*Occurrence) (int, error) {
		if b[0].UID == "b" {
			once.Do(func() { close(retrying) })
			return 0, errors.New("connection refused") // retried
		}
		return len(b), nil
	}}
	c := testConfig(t, s)
	c.Receivers[0].Batch = 1
	store := FileStore{Path: filepath.Join(t.TempDir(), "ck.json")}
	p, err := NewPipeline(c, PipelineOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"a", "b"} {
		if err := p.Occurred(t.Context(), occ(uid, 1, "ns")); err != nil {
			t.Fatal(err)
		}
	}
	<-retrying
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Shutdown(ctx); err == nil {
		t.Error("Shutdown returned nil with an occurrence of a Wait sink unwritten")
	}
	ck, err := store.Load(t.Context())
	if err != nil || ck == nil {
		t.Fatalf("checkpoint %v, %v", ck, err)
	}
	if _, ok := ck.Counts["b"]; ok || ck.Counts["a"] != 1 {
		t.Errorf("checkpoint counts %v: want a, written, and not b, unwritten", ck.Counts)
	}
}

// enteringSink signals each write's first key on entered and holds the
// write until release is closed (or its context ends).
type enteringSink struct {
	entered  chan string
	release  chan struct{}
	returned atomic.Int32 // writes that returned
}

func (s *enteringSink) Write(ctx context.Context, b []*Occurrence) (int, error) {
	defer s.returned.Add(1)
	select {
	case s.entered <- b[0].Key():
	default:
	}
	select {
	case <-s.release:
		return len(b), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (s *enteringSink) Close(context.Context) error { return nil }

// lossyPipeline returns a pipeline with one DropOldest sink of queue
// queueLen and batch 1 that holds its writes, checkpointing to a file
// only when told.
func lossyPipeline(t *testing.T, queueLen int) (*Pipeline, *enteringSink, FileStore) {
	t.Helper()
	s := &enteringSink{entered: make(chan string, 1), release: make(chan struct{})}
	c := testConfig(t, s)
	c.Receivers[0].Queue = Queue{Length: queueLen, Strategy: StrategyDropOldest}
	c.Receivers[0].Batch = 1
	c.Checkpoint.Interval = Duration(time.Hour)
	store := FileStore{Path: filepath.Join(t.TempDir(), "ck.json")}
	p, err := NewPipeline(c, PipelineOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return p, s, store
}

// A lossy sink holds the checkpoint back by at most its queue and one
// batch of the occurrences published: changes that enter no queue
// (deletions here; progress marks, occurrences routed nowhere) do not
// count. They did: with a = 1 occurrence being written, nothing queued
// behind it and ten deletions, the checkpoint covered a, which a crash then
// lost for that sink.
func TestLossyCheckpointDoesNotPassWhatItsSinkIsWriting(t *testing.T) {
	p, s, store := lossyPipeline(t, 4)
	if err := p.Occurred(t.Context(), occ("a", 1, "ns")); err != nil {
		t.Fatal(err)
	}
	<-s.entered
	for i := range 10 {
		p.Deleted(fmt.Sprint("old-", i), "")
	}
	p.saveCheckpoint(t.Context())
	ck, err := store.Load(t.Context())
	close(s.release)
	_ = p.Shutdown(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ck != nil && ck.Counts["a"] != 0 {
		t.Errorf("checkpoint counts %v: a is being written", ck.Counts)
	}
}

// Past its queue and one batch of occurrences published, a lossy sink
// holds the checkpoint back no more: a stuck one does not stop it.
func TestLossyCheckpointPassesWhatIsOlderThanItsQueueAndBatch(t *testing.T) {
	p, s, store := lossyPipeline(t, 2)
	for _, uid := range []string{"a", "b", "c", "d", "e"} {
		if err := p.Occurred(t.Context(), occ(uid, 1, "ns")); err != nil {
			t.Fatal(err)
		}
		if uid == "a" {
			<-s.entered // a is stuck; the queue of 2 then drops its oldest
		}
	}
	p.saveCheckpoint(t.Context())
	ck, err := store.Load(t.Context())
	close(s.release)
	_ = p.Shutdown(t.Context())
	if err != nil || ck == nil {
		t.Fatalf("checkpoint %v, %v", ck, err)
	}
	if ck.Counts["b"] != 1 || ck.Counts["c"] == 1 {
		t.Errorf("checkpoint counts %v: want through b, older than the last 3 published (queue 2 and batch 1), and not c", ck.Counts)
	}
}

// storeDown is a checkpoint store whose writes fail while down is set.
type storeDown struct {
	down  atomic.Bool
	saved atomic.Pointer[Checkpoint]
}

func (s *storeDown) Load(context.Context) (*Checkpoint, error) { return s.saved.Load(), nil }

func (s *storeDown) Save(_ context.Context, c *Checkpoint) error {
	if s.down.Load() {
		return errors.New("store down")
	}
	s.saved.Store(c)
	return nil
}

// While checkpoint writes fail, every change stays pending — a restart
// would forward it again — even those every sink has finished with; the
// failed write is tried again at the next tick though nothing changed
// since, and once one succeeds nothing is pending. The pending count read
// zero after each failed write, and a failed write was not tried again
// until a new change came.
func TestCheckpointPendingCountsChangesUntilACheckpointIsWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &storeDown{}
		store.down.Store(true)
		c := testConfig(t, NewMemorySink(0, nil))
		c.Checkpoint.Interval = Duration(time.Hour)
		p, err := NewPipeline(c, PipelineOptions{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Shutdown(context.Background()) }()
		for _, uid := range []string{"a", "b", "c"} {
			if err := p.Occurred(t.Context(), occ(uid, 1, "ns")); err != nil {
				t.Fatal(err)
			}
		}
		p.Deleted("a", "")
		synctest.Wait() // the sink has written a, b and c
		p.saveCheckpoint(t.Context())
		if st := p.PipelineStats(); st.CheckpointLag != 4 || st.CheckpointFailures != 1 {
			t.Fatalf("after a failed write: %d pending, %d failures; want 4 and 1", st.CheckpointLag, st.CheckpointFailures)
		}
		store.down.Store(false)
		p.saveCheckpoint(t.Context())
		st := p.PipelineStats()
		if st.CheckpointLag != 0 || st.CheckpointWrites != 1 {
			t.Errorf("after the store came back: %d pending, %d written; want 0 and 1", st.CheckpointLag, st.CheckpointWrites)
		}
		if ck := store.saved.Load(); ck == nil || ck.Counts["b"] != 1 || ck.Counts["c"] != 1 || len(ck.Counts) != 2 {
			t.Errorf("checkpoint written %+v: want b and c, not the deleted a", ck)
		}
	})
}

// A graceful stop whose last checkpoint cannot be written is an error
// (exit 1): exit 0 says the last checkpoint is written.
func TestShutdownFailsWhenTheLastCheckpointIsNotWritten(t *testing.T) {
	store := &storeDown{}
	store.down.Store(true)
	c := testConfig(t, &memSink{})
	c.Checkpoint.Interval = Duration(time.Hour)
	p, err := NewPipeline(c, PipelineOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, p, 3)
	if err := p.Shutdown(context.Background()); err == nil || !strings.Contains(err.Error(), "store down") {
		t.Errorf("Shutdown: %v, want the failed checkpoint write", err)
	}
}
