package fanout

import (
	"context"
	"runtime"
	"testing"
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
