package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
)

// kv is a value of a keyed stream: its key and its place in the stream.
type kv struct{ Key, Seq int }

func kvKey(v kv) string { return strconv.Itoa(v.Key) }

// gateSink blocks every Write of a value whose key is closed until the key
// is opened, and records the values it stored.
type gateSink struct {
	mu     sync.Mutex
	closed map[int]chan struct{}
	stored []kv
	active map[int]int // Write calls in flight per key
	most   int         // most Write calls in flight at once
	calls  int
}

func newGateSink(closed ...int) *gateSink {
	s := &gateSink{closed: map[int]chan struct{}{}, active: map[int]int{}}
	for _, k := range closed {
		s.closed[k] = make(chan struct{})
	}
	return s
}

func (s *gateSink) open(key int) { close(s.closed[key]) }

func (s *gateSink) Write(ctx context.Context, batch []kv) (int, error) {
	s.mu.Lock()
	s.calls++
	s.most = max(s.most, s.calls)
	var wait []chan struct{}
	for _, v := range batch {
		s.active[v.Key]++
		if ch := s.closed[v.Key]; ch != nil {
			wait = append(wait, ch)
		}
	}
	s.mu.Unlock()
	for _, ch := range wait {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls--
	for _, v := range batch {
		s.active[v.Key]--
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.stored = append(s.stored, batch...)
	return len(batch), nil
}

func (s *gateSink) storedKeys() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]int, len(s.stored))
	for i, v := range s.stored {
		keys[i] = v.Key
	}
	return keys
}

// startKeyed starts a runner with writers on a lossless watcher of a new
// broadcaster.
func startKeyed(t *testing.T, ctx context.Context, sink fanout.BatchSink[kv], cfg fanout.BatchConfig[kv]) (*fanout.Broadcaster[kv], *fanout.Runner[kv]) {
	t.Helper()
	b := fanout.New[kv]()
	w, err := b.Watch(fanout.WithQueueLength(8), fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull))
	require.NoError(t, err)
	if cfg.Key == nil {
		cfg.Key = kvKey
	}
	run, err := fanout.StartBatchSink(ctx, w, sink, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		b.Shutdown()
		run.Stop()
		<-run.Done()
	})
	return b, run
}

// A key whose write does not return holds back its own later values only:
// the other keys are written meanwhile, in parallel, while Finished (a low
// watermark) waits for the stuck value.
func TestWritersHoldBackOnlyTheKeyThatIsStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newGateSink(1)
		var finished []int
		b, run := startKeyed(t, t.Context(), sink, fanout.BatchConfig[kv]{Writers: 4,
			Finished: func(received []kv) {
				for _, v := range received {
					finished = append(finished, v.Seq)
				}
			}})
		for i, k := range []int{1, 2, 3, 1, 2, 3} {
			err := b.Action(kv{k, i})
			require.NoError(t, err)
		}
		synctest.Wait()
		assert.Equal(t, []int{2, 2, 3, 3}, slices.Sorted(slices.Values(sink.storedKeys())), "keys 2 and 3 are written")
		assert.Empty(t, finished, "nothing is finished past the stuck first value")
		st := run.Stats()
		assert.Equal(t, [2]int{1, 1}, [2]int{st.InFlight, st.Queued}, "key 1: one value in flight, one waiting")
		sink.open(1)
		synctest.Wait()
		assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, finished, "finished in the order taken")
		assert.Equal(t, uint64(6), run.Stats().Written)
	})
}

// storeSink is a Sink whose Create blocks for the keys closed in a
// gateSink, so that a recorder's sink runner can be held.
type storeSink struct{ g *gateSink }

func (s storeSink) Create(ctx context.Context, v kv) (kv, error) {
	_, err := s.g.Write(ctx, []kv{v})
	return v, err
}

func (s storeSink) Update(ctx context.Context, v kv) (kv, error) { return s.Create(ctx, v) }

// A recorder's sink runner with writers writes other keys past a stuck
// one, and Flush waits for every writer, the stuck one included.
func TestRecorderFlushWaitsForEveryWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := fanout.NewRecorder[kv]()
		require.NoError(t, err)
		defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
		sink := newGateSink(1)
		_, err = r.StartSink(storeSink{sink}, nil, fanout.WithWriters(4, kvKey))
		require.NoError(t, err)
		for i, k := range []int{1, 2, 3, 1, 2} {
			require.NoError(t, r.Record(kv{k, i}))
		}
		flushed := make(chan error, 1)
		go func() { flushed <- r.Flush(t.Context()) }()
		synctest.Wait()
		assert.Equal(t, []int{2, 2, 3}, slices.Sorted(slices.Values(sink.storedKeys())))
		select {
		case <-flushed:
			t.Fatal("Flush returned with a value of key 1 in flight")
		default:
		}
		sink.open(1)
		require.NoError(t, <-flushed)
		assert.Equal(t, uint64(5), r.Stats().Written)
	})
}

// Values of one key are never in two writes at once, and with as many
// stuck keys as writers, every writer is busy and no more is started.
func TestWritersAreBoundedAndExclusivePerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newGateSink(0, 1, 2, 3, 4)
		b, run := startKeyed(t, t.Context(), sink, fanout.BatchConfig[kv]{Writers: 3})
		for i := range 15 { // the queue's 8 and the 8 the runner holds
			err := b.Action(kv{i % 5, i})
			require.NoError(t, err)
		}
		synctest.Wait()
		sink.mu.Lock()
		assert.Equal(t, 3, sink.most, "three writers, three stuck keys")
		for k, n := range sink.active {
			assert.LessOrEqual(t, n, 1, "key %d is in %d writes", k, n)
		}
		sink.mu.Unlock()
		for k := range 5 {
			sink.open(k)
		}
		synctest.Wait()
		assert.Equal(t, uint64(15), run.Stats().Written)
		assert.Equal(t, 3, sink.most)
	})
}

// A key function that panics drops that value (DropPanic) and nothing else.
func TestWritersDropAValueWhoseKeyPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newGateSink()
		b, run := startKeyed(t, t.Context(), sink, fanout.BatchConfig[kv]{Writers: 2, Key: func(v kv) string {
			if v.Key == 7 {
				panic("bad key")
			}
			return kvKey(v)
		}})
		for i, k := range []int{1, 7, 2} {
			err := b.Action(kv{k, i})
			require.NoError(t, err)
		}
		synctest.Wait()
		st := run.Stats()
		assert.Equal(t, [2]uint64{2, 1}, [2]uint64{st.Written, st.DroppedPanic}, "written, dropped by panic")
		assert.Equal(t, uint64(1), b.Stats().Panics)
	})
}

// When the runner's context ends, the values still waiting for their key
// are dropped as DropShutdown, counted, and Finished stops at the first
// batch that lost one.
func TestWritersDropWhatWaitsWhenTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		sink := newGateSink(1)
		var finished []int
		b, run := startKeyed(t, ctx, sink, fanout.BatchConfig[kv]{Writers: 2,
			Finished: func(received []kv) { finished = append(finished, received[0].Seq) }})
		for i, k := range []int{2, 1, 1, 1, 3} {
			err := b.Action(kv{k, i})
			require.NoError(t, err)
		}
		synctest.Wait()
		cancel()
		<-run.Done()
		st := run.Stats()
		assert.Equal(t, uint64(2), st.Written, "keys 2 and 3")
		assert.Equal(t, uint64(3), st.DroppedShutdown, "key 1's three values")
		assert.Equal(t, []int{0}, finished, "only what precedes the first lost value")
		assert.Equal(t, st.Received, st.Written+st.Dropped)
	})
}

// Bad writer settings are refused, and nothing is started.
func TestWritersConfigurationIsChecked(t *testing.T) {
	for name, cfg := range map[string]fanout.BatchConfig[int]{
		"negative":           {Writers: -1, Key: func(int) string { return "" }},
		"above MaxWriters":   {Writers: fanout.MaxWriters + 1, Key: func(int) string { return "" }},
		"several and no key": {Writers: 2},
	} {
		t.Run(name, func(t *testing.T) {
			b := fanout.New[int]()
			defer b.Shutdown()
			w, err := b.Watch()
			require.NoError(t, err)
			run, err := fanout.StartBatchSink(t.Context(), w, &batchSink{}, cfg)
			require.Error(t, err)
			assert.Nil(t, run)
		})
	}
	r, err := fanout.NewRecorder[int]()
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	_, err = r.StartSink(&kvSink{}, nil, fanout.WithWriters[int](-1, nil))
	require.ErrorContains(t, err, "Writers -1")
	_, err = r.StartSink(&kvSink{}, nil, fanout.WithWriters[int](fanout.MaxWriters+1, nil))
	require.ErrorContains(t, err, "MaxWriters")
	_, err = r.StartSink(&kvSink{}, nil, nil)
	require.ErrorContains(t, err, "nil SinkOption")
}

type kvSink struct{}

func (kvSink) Create(_ context.Context, v int) (int, error) { return v, nil }
func (kvSink) Update(_ context.Context, v int) (int, error) { return v, nil }

// modelSink fails, rejects, panics on or writes part of a batch at random,
// and checks as it goes that no two writes in flight share a key and that
// each key's values come in order; it records what it stored.
type modelSink struct {
	t      *testing.T
	seed   uint64
	mu     sync.Mutex
	keyOf  []int // the key of each Seq
	active map[int]bool
	stored map[int][]int
	all    map[int]bool // every Seq stored
	tries  map[int]int  // attempts per Seq
	// dropped holds the Seqs the runner reported dropped (OnDrop).
	dropped map[int]bool
}

var errModelPermanent = errors.New("permanent")

func (s *modelSink) Write(_ context.Context, batch []kv) (int, error) {
	s.enter(batch)
	defer s.leave(batch)
	rng := rand.New(rand.NewPCG(s.seed, uint64(batch[0].Seq)<<8|uint64(s.try(batch[0].Seq))))
	n := len(batch)
	if rng.IntN(3) == 0 {
		n = rng.IntN(len(batch))
	}
	fail := rng.IntN(8)
	if fail == 2 && n == 0 {
		panic("model sink panics") // before storing anything: the runner drops the first value
	}
	s.store(batch[:n])
	switch {
	case fail == 0:
		return n, errors.New("retry me")
	case fail == 1 && n < len(batch):
		return n, errModelPermanent
	case n < len(batch):
		return n, errors.New("short")
	}
	return n, nil
}

func (s *modelSink) try(seq int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries[seq]++
	return s.tries[seq]
}

func (s *modelSink) enter(batch []kv) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := map[int]bool{}
	for i, v := range batch {
		if s.active[v.Key] && !keys[v.Key] {
			s.t.Errorf("key %d is in two writes at once", v.Key)
		}
		keys[v.Key] = true
		for u := range v.Seq { // every earlier value of the key is settled, or before v in this batch
			if s.keyOf[u] == v.Key && u%11 != 5 && !s.all[u] && !s.dropped[u] && !slices.Contains(batch[:i], kv{v.Key, u}) {
				s.t.Errorf("key %d: value %d written before %d was settled", v.Key, v.Seq, u)
			}
		}
	}
	for k := range keys {
		s.active[k] = true
	}
}

// drop records values the runner dropped, checking that none was stored
// or dropped before.
func (s *modelSink) drop(vs []kv) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range vs {
		if s.dropped[v.Seq] || s.all[v.Seq] {
			s.t.Errorf("value %d dropped twice or after being stored", v.Seq)
		}
		s.dropped[v.Seq] = true
	}
}

func (s *modelSink) settled(seq int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all[seq] || s.dropped[seq]
}

func (s *modelSink) leave(batch []kv) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range batch {
		s.active[v.Key] = false
	}
}

func (s *modelSink) store(vs []kv) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range vs {
		s.stored[v.Key] = append(s.stored[v.Key], v.Seq)
		s.all[v.Seq] = true
	}
}

// The model: whatever the number of writers, batch size and failures,
// every key's values are written in order, one write at a time, each value
// is stored at most once and is either stored or dropped with a reason
// (exactly once), and Finished reports every batch once, in the order
// taken, only after each of its values and every earlier one was settled.
func TestWritersModel(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkWritersModel(t, seed) })
	}
}

func checkWritersModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0))
	writers, batch, keys, n := 2+rng.IntN(7), 1+rng.IntN(6), 1+rng.IntN(12), 200+rng.IntN(300)
	sink := &modelSink{t: t, seed: seed, keyOf: make([]int, n), active: map[int]bool{}, stored: map[int][]int{},
		all: map[int]bool{}, tries: map[int]int{}, dropped: map[int]bool{}}
	for i := range sink.keyOf {
		sink.keyOf[i] = rng.IntN(keys)
	}
	var finished []int
	cfg := fanout.BatchConfig[kv]{Writers: writers, Batch: batch, Key: kvKey,
		Retry: &fanout.RetryPolicy{MaxTries: 3, Sleep: time.Microsecond,
			Retryable: func(err error) bool { return !errors.Is(err, errModelPermanent) }},
		Select: func(received, out []kv) []kv {
			for _, v := range received {
				if v.Seq%11 != 5 { // a few are left out
					out = append(out, v)
				}
			}
			return out
		},
		OnDrop: func(_ fanout.Drop, vs []kv) { sink.drop(vs) },
		Finished: func(received []kv) {
			for _, v := range received {
				if v.Seq%11 != 5 && !sink.settled(v.Seq) {
					t.Errorf("value %d finished before it was stored or dropped", v.Seq)
				}
				finished = append(finished, v.Seq)
			}
		},
	}
	b, run := startKeyed(t, t.Context(), sink, cfg)
	for i, k := range sink.keyOf {
		require.NoError(t, b.Action(kv{k, i}))
	}
	b.Shutdown()
	<-run.Done()

	st := run.Stats()
	stored := 0
	for k, seqs := range sink.stored {
		require.True(t, slices.IsSorted(seqs), "key %d stored out of order: %v", k, seqs)
		require.Len(t, slices.Compact(slices.Clone(seqs)), len(seqs), "key %d: a value stored twice", k)
		stored += len(seqs)
	}
	leftOut := uint64(0)
	for i := range n {
		if i%11 == 5 {
			leftOut++
		} else if !sink.settled(i) {
			t.Errorf("value %d neither stored nor dropped", i)
		}
	}
	assert.Equal(t, uint64(stored), st.Written)
	assert.Equal(t, uint64(n), st.Received)
	assert.Equal(t, st.Received, st.Written+st.Dropped+leftOut, "every value written, dropped or left out")
	assert.Equal(t, uint64(len(sink.dropped)), st.Dropped)
	assert.Equal(t, 0, st.Queued+st.InFlight)
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	assert.Equal(t, want, finished, "every batch finished once, in order")
}

// heldSink is a Sink that holds the writes for which hold returns a
// channel until it is closed, and records every write.
type heldSink struct {
	hold  func(op string, v ev) chan struct{}
	mu    sync.Mutex
	calls []string
}

func (s *heldSink) write(ctx context.Context, op string, v ev) (ev, error) {
	if ch := s.hold(op, v); ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return v, ctx.Err()
		}
	}
	s.mu.Lock()
	s.calls = append(s.calls, fmt.Sprintf("%s %s/%s %d", op, v.Obj, v.Msg, v.Count))
	s.mu.Unlock()
	return v, nil
}

func (s *heldSink) Create(ctx context.Context, v ev) (ev, error) { return s.write(ctx, "create", v) }
func (s *heldSink) Update(ctx context.Context, v ev) (ev, error) { return s.write(ctx, "update", v) }

func (s *heldSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// countingDedup is a dedup stage whose records carry their count, as
// Kubernetes Events do, so that Observe reads it back.
func countingDedup() *fanout.DedupStage[ev] {
	d := dedupStage()
	d.Count = func(e ev) int { return e.Count }
	return d
}

// With several writers, a create that ends after later occurrences of its
// key were correlated does not take the remembered count back: the next
// occurrence still counts on.
func TestSinkWritersObserveNeverTakesACountBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t)
		c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: countingDedup()})
		created, updated := make(chan struct{}), make(chan struct{})
		sink := &heldSink{hold: func(op string, v ev) chan struct{} {
			switch {
			case op == "create":
				return created
			case v.Count == 2:
				return updated
			}
			return nil
		}}
		_, err := r.StartSink(sink, c, fanout.WithWriters[ev](4, nil))
		require.NoError(t, err)
		a := ev{Obj: "a", Reason: "R", Msg: "m", Count: 1}
		for range 3 {
			require.NoError(t, r.Record(a))
		}
		synctest.Wait() // correlated 1, 2, 3; the create of 1 held
		close(created)
		synctest.Wait() // 1 stored and observed; the update of 2 held
		require.NoError(t, r.Record(a))
		close(updated)
		require.NoError(t, r.Flush(t.Context()))
		assert.Equal(t, []string{"create a/m 1", "update a/m 2", "update a/m 3", "update a/m 4"}, sink.got())
	})
}

// A sink runner with writers decides exactly as with one writer (the same
// creates, updates, counts and skips, whatever the writes' timing), and
// writes each record's occurrences in order. (Only while the correlator's
// cache holds every key: Observe refreshes a key's place in it, and with
// writers it does so when the write ends.)
func TestSinkWritersDecideAsOneWriterAndKeepEachRecordInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	stream := make([]ev, 2000)
	for i := range stream {
		stream[i] = ev{Obj: fmt.Sprint("o", rng.IntN(40)), Reason: "R", Msg: fmt.Sprint("m", rng.IntN(3)), Count: 1}
	}
	run := func(writers int) ([]string, fanout.RecorderStats) {
		r := newRecorder[ev](t, fanout.WithQueueLength(len(stream)))
		c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: countingDedup(), Spam: spamStage(30, 1e-9)})
		sink := &heldSink{hold: func(string, ev) chan struct{} {
			if rng := rand.N(4); rng == 0 {
				runtime.Gosched()
			}
			return nil
		}}
		_, err := r.StartSink(sink, c, fanout.WithWriters[ev](writers, nil))
		require.NoError(t, err)
		for _, e := range stream {
			require.NoError(t, r.Record(e))
		}
		require.NoError(t, r.Flush(t.Context()))
		return sink.got(), r.Stats()
	}
	one, oneStats := run(1)
	many, manyStats := run(6)
	assert.ElementsMatch(t, one, many, "the same writes")
	assert.Equal(t, oneStats, manyStats)
	perKey := map[string][]string{}
	for _, w := range one {
		k := strings.Fields(w)[1]
		perKey[k] = append(perKey[k], w)
	}
	for _, w := range many {
		k := strings.Fields(w)[1]
		require.NotEmpty(t, perKey[k])
		assert.Equal(t, perKey[k][0], w, "record %s's writes in order", k)
		perKey[k] = perKey[k][1:]
	}
}

// rttSink is a BatchSink whose every Write takes rtt, as a request to a
// server does.
type rttSink struct{ rtt time.Duration }

func (s rttSink) Write(_ context.Context, batch []kv) (int, error) {
	time.Sleep(s.rtt)
	return len(batch), nil
}

// BenchmarkWriters measures a batch runner writing to a sink whose writes
// take 200 µs each (a request to a nearby server), one value a write, over
// 64 keys: the time per value with 1, 4, 16 and 64 writers. The ratio to
// one writer is the speed-up of the writes leaving the process.
func BenchmarkWriters(b *testing.B) {
	for _, writers := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprint("writers=", writers), func(b *testing.B) {
			br := fanout.New[kv]()
			w, err := br.Watch(fanout.WithQueueLength(1024), fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull))
			require.NoError(b, err)
			run, err := fanout.StartBatchSink(context.Background(), w, rttSink{200 * time.Microsecond},
				fanout.BatchConfig[kv]{Writers: writers, Key: kvKey})
			require.NoError(b, err)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				require.NoError(b, br.Action(kv{i % 64, i}))
				i++
			}
			br.Shutdown()
			<-run.Done()
			b.ReportMetric(float64(run.Stats().Written)/b.Elapsed().Seconds(), "values/s")
		})
	}
}

// A sink runner with several writers settles a repeat merged into its
// record, which makes no write, without allocating: a burst of repeats
// costs Flush's few allocations, not one or more per repeat.
func TestSinkWritersSettleMergedRepeatsWithoutAllocating(t *testing.T) {
	r, err := fanout.NewRecorder[benchLog]()
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[benchLog]{
		Dedup: &fanout.DedupStage[benchLog]{ // a series: written twice, then merged
			Key:        func(e benchLog) string { return e.obj },
			Merge:      func(rec benchLog, n int, _ time.Time) benchLog { rec.count = n; return rec },
			WriteFirst: 2,
		},
	})
	require.NoError(t, err)
	_, err = r.StartSink(benchSink{}, c, fanout.WithWriters[benchLog](4, nil))
	require.NoError(t, err)
	e := benchLog{obj: "pod", reason: "BackOff", msg: "restarting"}
	require.NoError(t, r.Record(e)) // a Create, then an Update; the rest is merged
	require.NoError(t, r.Record(e))
	require.NoError(t, r.Flush(context.Background()))
	const repeats = 100
	allocs := testing.AllocsPerRun(20, func() {
		for range repeats {
			_ = r.Record(e)
		}
		_ = r.Flush(context.Background())
	})
	assert.Less(t, allocs, float64(repeats)/4, "allocations per burst of %d repeats", repeats)
	st := r.Stats()
	assert.Zero(t, st.Dropped)
	assert.EqualValues(t, 2, st.Written, "the repeats after the second are merged")
}
