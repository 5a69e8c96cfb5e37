package harness

import (
	"runtime"
	"sync"
	"testing"

	"github.com/smarty/go-disruptor"
)

// blockingHandler is a go-disruptor reader whose first Handle call tells
// entered and waits for release.
type blockingHandler struct {
	entered, release chan struct{}
	once             sync.Once
	handled          int64
}

func (h *blockingHandler) Handle(lower, upper int64) {
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
	h.handled += upper - lower + 1
}

// signallingWait yields like [yieldingWait] and tells reserving the first
// time a writer waits for room.
type signallingWait struct {
	reserving chan struct{}
	once      *sync.Once
}

func (w signallingWait) Gate(int64) { runtime.Gosched() }
func (w signallingWait) Idle(int64) { runtime.Gosched() }
func (w signallingWait) Reserve(int64) {
	w.once.Do(func() { close(w.reserving) })
	runtime.Gosched()
}

// The harness closes a go-disruptor only once every reader has handled
// every committed value: go-disruptor's own Close would let a reader that
// had looked for values just before the last commit return without it.
// With a reader held inside its handler, close waits for it (it reserves
// the ring and waits for room) rather than returning.
func TestDisruptorCloseWaitsUntilEveryReaderHandledTheLastValue(t *testing.T) {
	h := &blockingHandler{entered: make(chan struct{}), release: make(chan struct{})}
	wait := signallingWait{reserving: make(chan struct{}), once: &sync.Once{}}
	d, err := disruptor.New(disruptor.Options.BufferCapacity(DisruptorRing), disruptor.Options.WaitStrategy(wait),
		disruptor.Options.NewHandlerGroup(h))
	if err != nil {
		t.Fatal(err)
	}
	inst := &disruptorInstance{d: d, ring: make([]*Event, DisruptorRing), mask: DisruptorRing - 1}
	var wg sync.WaitGroup
	wg.Go(d.Listen)
	inst.publish(&Event{})
	<-h.entered
	closed := make(chan struct{})
	wg.Go(func() {
		inst.close()
		close(closed)
	})
	select {
	case <-wait.reserving:
	case <-closed:
		t.Error("close returned while the reader had not handled the value")
	}
	close(h.release)
	<-closed
	wg.Wait()
	if h.handled != 1 {
		t.Errorf("the reader handled %d values, want 1", h.handled)
	}
}
