package harness

import (
	"runtime"
	"time"

	"github.com/smarty/go-disruptor"
)

// SystemDisruptor is github.com/smarty/go-disruptor, the maintained fork of
// github.com/smartystreets-prototypes/go-disruptor (a port of the LMAX
// Disruptor): one ring the application owns, sequences the library
// tracks, and one goroutine of the library per reader calling a handler
// with each batch of committed sequences.
const SystemDisruptor = "disruptor"

// DisruptorRing is the ring of [Disruptor]: 128 values, the power of two
// nearest fanout's default queue of 100.
const DisruptorRing = 128

// Disruptor is github.com/smarty/go-disruptor v0.5.0 in its best use for a
// fan-out: a ring of [DisruptorRing] *Event the harness owns, one handler
// group holding every watcher (each handler on its own goroutine, all
// reading every value), and a wait strategy that yields
// ([yieldingWait]): a reader with nothing to read, and a writer facing a
// full ring, call runtime.Gosched and look again, never park. That buys
// the lowest latency and throughput at the price of CPU: an idle reader
// keeps a processor busy (the idle-CPU table shows it). The library's
// default strategy sleeps 500 ns per idle look instead. Each publish is
// Reserve(1), a store into the ring and Commit; with several producers the
// disruptor is built for that many writers (its shared sequencer). The
// harness closes it once every reader has handled every committed value
// ([disruptorInstance.close]); Listen then returns.
var Disruptor = System{Name: SystemDisruptor, Strategy: StrategyWait, API: APIHandler, Queue: DisruptorRing}

// yieldingWait is the go-disruptor wait strategy of [Disruptor]: every wait
// yields the processor once.
type yieldingWait struct{}

func (yieldingWait) Gate(int64)    { runtime.Gosched() }
func (yieldingWait) Idle(int64)    { runtime.Gosched() }
func (yieldingWait) Reserve(int64) { runtime.Gosched() }

type disruptorInstance struct {
	d    disruptor.Disruptor
	ring []*Event
	mask int64
	e    *Event
}

func (d *disruptorInstance) publishN(n int) {
	for range n {
		d.publish(d.e)
	}
}

func (d *disruptorInstance) publish(e *Event) {
	seq := d.d.Reserve(1)
	d.ring[seq&d.mask] = e
	d.d.Commit(seq, seq)
}

// close ends Listen once every reader has handled every committed value.
// go-disruptor's Close alone does not promise that: a reader that found
// nothing committed and then reads the closed flag returns, whatever was
// committed and closed between its two looks (seen in the harness's own
// tests: 1 value of 120 lost in a latency run, 122 of 1,500 with two
// writers). So close first reserves the whole ring: Reserve returns only
// when the slowest reader has handled the last value published before it
// (the wrap check), and the reserved slots are never committed, so no
// reader waits for them.
func (d *disruptorInstance) close() {
	d.d.Reserve(uint32(len(d.ring)))
	_ = d.d.Close()
}
func (d *disruptorInstance) libDropped() uint64 { return 0 }

// disruptorReader is one watcher's handler: it counts the values of each
// batch, recording their latency if there is a recorder.
type disruptorReader struct {
	ring    []*Event
	mask    int64
	n       int64
	rec     *recorder
	lat     []int64
	ordered bool // check the order of the values (the working-reader group)
	o       order
}

// Handle implements disruptor.Handler.
func (h *disruptorReader) Handle(lower, upper int64) {
	h.n += upper - lower + 1
	if h.ordered {
		for seq := lower; seq <= upper; seq++ {
			h.o.see(h.ring[seq&h.mask].Stamp)
		}
		return
	}
	if h.rec == nil {
		return
	}
	now := h.rec.now()
	for seq := lower; seq <= upper; seq++ {
		h.lat = append(h.lat, now-h.ring[seq&h.mask].Stamp)
	}
}

// newDisruptor builds the disruptor of s for the given writers, with one
// handler per reader, all in one group.
func newDisruptor(s System, writers int, handlers []disruptor.Handler) (disruptor.Disruptor, error) {
	return disruptor.New(
		disruptor.Options.BufferCapacity(uint32(s.Queue)),
		disruptor.Options.WriterCount(uint8(min(max(writers, 1), 255))),
		disruptor.Options.WaitStrategy(yieldingWait{}),
		disruptor.Options.NewHandlerGroup(handlers...))
}

// startDisruptor builds s with n readers and runs Listen on a goroutine of
// the harness (the library starts one more per reader); once Listen
// returns, after the close, the readers' counts are the consumers'.
func (c *consumers) startDisruptor(s System, n int) error {
	inst := &disruptorInstance{ring: make([]*Event, s.Queue), mask: int64(s.Queue - 1), e: c.payload}
	readers := make([]*disruptorReader, n)
	handlers := make([]disruptor.Handler, n)
	for i := range readers {
		readers[i] = &disruptorReader{ring: inst.ring, mask: inst.mask, rec: c.rec, ordered: c.ordered}
		if c.rec != nil {
			readers[i].lat = make([]int64, 0, c.rec.capacity)
		}
		handlers[i] = readers[i]
	}
	d, err := newDisruptor(s, c.producers, handlers)
	if err != nil {
		return err
	}
	inst.d = d
	c.r.inst = inst
	c.r.wg.Go(func() {
		d.Listen()
		for i, h := range readers {
			c.r.counts[i], c.r.samples[i], c.r.broken[i] = h.n, h.lat, h.o.broken
		}
	})
	return nil
}

// idleDisruptor builds s with n readers nobody publishes to and runs
// Listen; its readers yield in a loop, never parked. It stores the
// disruptor in keep and returns the function that closes it and waits
// until Listen has returned.
func idleDisruptor(s System, n int, keep []any) (func(), error) {
	ring := make([]*Event, s.Queue)
	handlers := make([]disruptor.Handler, n)
	for i := range handlers {
		handlers[i] = &disruptorReader{ring: ring, mask: int64(s.Queue - 1)}
	}
	d, err := newDisruptor(s, 1, handlers)
	if err != nil {
		return nil, err
	}
	keep[0] = d
	done := make(chan struct{})
	want := runtime.NumGoroutine() + 1 // Listen's, and one per reader if several
	if n > 1 {
		want += n
	}
	go func() {
		defer close(done)
		d.Listen()
	}()
	for deadline := time.Now().Add(time.Second); runtime.NumGoroutine() < want && time.Now().Before(deadline); {
		runtime.Gosched() // until the readers' goroutines, and so their stacks, exist
	}
	return func() {
		_ = d.Close()
		<-done
	}, nil
}
