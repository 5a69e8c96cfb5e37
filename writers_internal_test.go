package fanout

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// gateSink writes a value each time its gate lets one through.
type gateSink struct{ gate chan struct{} }

func (s gateSink) Create(context.Context, int) (int, error) { <-s.gate; return 0, nil }
func (s gateSink) Update(context.Context, int) (int, error) { <-s.gate; return 0, nil }

// A key written more slowly than it is recorded never runs empty, so its
// queue is never reset; what its slice holds stays within a few times the
// runner's bound (the values taken are dropped from its front), however
// many values go through it.
func TestKeyThatNeverRunsEmptyKeepsItsQueueBounded(t *testing.T) {
	r, err := NewRecorder[int](WithQueueLength(256))
	if err != nil {
		t.Fatal(err)
	}
	s := gateSink{gate: make(chan struct{})}
	run, err := r.StartSink(s, nil, WithWriters(2, func(int) string { return "hot" }))
	if err != nil {
		t.Fatal(err)
	}
	kw := run.kw
	held := func() int {
		kw.mu.Lock()
		defer kw.mu.Unlock()
		if q := kw.keys["hot"]; q != nil {
			return len(q.items) - q.head
		}
		return 0
	}
	for i := range 200 {
		_ = r.Record(i)
	}
	for held() < 150 { // the runner has handed them to the key
		runtime.Gosched()
	}
	most := 0
	for i := range 20_000 {
		_ = r.Record(i) // one in, one written: the key never runs empty
		s.gate <- struct{}{}
		kw.mu.Lock()
		if q := kw.keys["hot"]; q != nil {
			most = max(most, cap(q.items))
		}
		kw.mu.Unlock()
	}
	close(s.gate)
	_ = r.Shutdown(context.Background())
	if bound := 4 * max(kw.limit, 64); most > bound {
		t.Errorf("the key's queue grew to a capacity of %d values; the runner holds at most %d", most, kw.limit)
	}
}

// sleepSink takes a while to write each value.
type sleepSink struct{}

func (sleepSink) Create(context.Context, int) (int, error) {
	time.Sleep(20 * time.Millisecond)
	return 0, nil
}
func (sleepSink) Update(context.Context, int) (int, error) {
	time.Sleep(20 * time.Millisecond)
	return 0, nil
}

// Writers run while there are writes to make: a burst of distinct keys
// starts up to n of them, and once it is written none is left, until the
// next value starts one again.
func TestWritersEndWhenNothingIsLeftToWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := NewRecorder[int]()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = r.Shutdown(context.Background()) }()
		run, err := r.StartSink(sleepSink{}, nil, WithWriters(8, strconv.Itoa))
		if err != nil {
			t.Fatal(err)
		}
		running := func() int {
			run.kw.mu.Lock()
			defer run.kw.mu.Unlock()
			return run.kw.writers
		}
		for i := range 64 {
			_ = r.Record(i)
		}
		synctest.Wait()
		if n := running(); n != 8 {
			t.Errorf("%d writers run during the burst, want 8", n)
		}
		if err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := running(); n != 0 {
			t.Errorf("%d writers left once the burst is written, want 0", n)
		}
		_ = r.Record(64)
		if err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := run.Stats(); st.Written != 65 {
			t.Errorf("written %d of 65", st.Written)
		}
	})
}
