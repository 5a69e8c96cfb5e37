package fanout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/fanout-go/fanout/internal/guard"
)

// MaxWriters is the most writers a runner may have ([BatchConfig].Writers,
// [WithWriters]). Writers are goroutines, started as the keys waiting for
// one need them, that end when no key is left to write: a runner with
// nothing to write has only its own goroutine.
const MaxWriters = 1024

// SinkOption configures a runner started by [Recorder.StartSink].
type SinkOption[T any] interface {
	applySink(*sinkConfig[T])
}

type sinkConfig[T any] struct {
	writers int
	key     func(T) string
}

type writersOption[T any] struct {
	n   int
	key func(T) string
}

func (o writersOption[T]) applySink(c *sinkConfig[T]) { c.writers, c.key = o.n, o.key }

// WithWriters has a sink runner ([Recorder.StartSink]) make up to n writes
// at once, 1 to [MaxWriters] (default: one), in order per key, as
// [BatchConfig].Writers does. The runner's goroutine still passes every
// value through the [SinkCorrelator], in order, so that its decisions are
// exactly those of one writer (what it skips, merges and counts); the
// writes that follow go to up to n
// writers, one write per key at a time: a value is written only once every
// earlier value of its key is written or dropped, so that a record is
// created before it is updated, while other keys are written in parallel
// and a key whose writes fail holds only itself back. The key of a value
// is key(value to write), or, for a nil key, the key the correlator counted
// it under ([Correlation].Key: with a [Correlator], the dedup key, or the
// group key of an aggregated value; "" without a correlator, which makes
// every write wait for the one before).
//
// The sink's Create and Update are then called from up to n goroutines at
// once, and the correlator's Observe from the writers, possibly after
// later values of the same key were correlated ([Correlator.Observe]
// never lowers a count for that reason): both must be safe for concurrent
// use. So a repeat may be correlated before the write of the value before
// it has ended: its [DedupStage].Repeat then gets that value as it was
// sent, not as the sink stored it (with one writer, the stored one). A
// sink that needs what it stored for the previous write of a key (an ID it
// assigned, a version) keeps it itself and applies it as it writes the
// repeat: the writes of one key never overlap, so the one before has
// ended by then (k8s/record does so for the resourceVersion).
func WithWriters[T any](n int, key func(T) string) SinkOption[T] {
	return writersOption[T]{n, key}
}

// newSinkConfig applies opts and checks the result.
func newSinkConfig[T any](opts []SinkOption[T]) (sinkConfig[T], error) {
	var c sinkConfig[T]
	for _, o := range opts {
		if o == nil {
			return c, errors.New("fanout: StartSink: nil SinkOption")
		}
		o.applySink(&c)
	}
	return c, checkWriters(c.writers, c.key, false)
}

// checkWriters reports an invalid number of writers, or a missing key
// where one is needed.
func checkWriters[T any](n int, key func(T) string, needKey bool) error {
	switch {
	case n < 0 || n > MaxWriters:
		return fmt.Errorf("fanout: invalid Writers %d: must be 0 or 1 (one writer) to MaxWriters (%d)", n, MaxWriters)
	case needKey && n > 1 && key == nil:
		return fmt.Errorf("fanout: Writers %d needs a Key function: it orders the writes", n)
	}
	return nil
}

// keyedWriters runs a runner's writes on up to n goroutines, in order per
// key (see [BatchConfig].Writers). The runner's goroutine (dispatch) takes
// values from the watcher, passes them through the Select hook and appends
// each to its key's queue; a key with values queued and no writer is
// ready. A writer takes the oldest ready keys (a batch of up to batch
// values), holds them while it writes, and then gives them back: ready
// again, at the back, if more values came meanwhile. So one key is written
// by one writer at a time, in order, and a key that fails holds only the
// keys of its own batch.
//
// Each batch taken from the watcher is a group. A group is settled — the
// Finished hook called, Flush told — once its values are written or
// dropped and every earlier group is settled: in the order taken, one
// goroutine at a time (settle), whichever writer finished last.
//
// All fields below mu are guarded by it.
type keyedWriters[T any] struct {
	run        *Runner[T]
	prepare    func(T) (prepared[T], bool)
	newHandler func() keyedHandler[T]
	n          int // most writers
	batch      int
	limit      int // most values held: queued in keys or being written
	keep       bool

	mu       sync.Mutex
	room     sync.Cond // dispatch waits for held < limit
	keys     map[string]*keyQueue[T]
	ready    []*keyQueue[T] // keys with values queued and no writer, oldest first
	spare    []*keyQueue[T]
	groups   []*group[T] // taken and not yet settled, in order
	held     int
	writers  int // running
	settling bool
	settled  []*group[T] // the settler's scratch
	wg       sync.WaitGroup

	scratch []prepared[T] // dispatch's
	// queued counts the values held waiting for their key, for Stats;
	// those being written are counted in the runner's inflight.
	queued atomic.Int64
}

// keyQueue holds the values of one key not yet written, oldest first
// (from head); busy while a writer holds the key.
type keyQueue[T any] struct {
	key   string
	items []keyedValue[T]
	head  int
	busy  bool
}

type keyedValue[T any] struct {
	v     T
	count int // a sink runner's occurrence count
	g     *group[T]
}

// keyedHandler writes values a writer took (with their occurrence counts,
// for a sink runner) and reports whether values were lost to the runner's
// stop.
type keyedHandler[T any] func(values []T, counts []int) (cut bool)

// prepared is a value ready to be queued for a writer: what to write, its
// key and, for a sink runner, its occurrence count.
type prepared[T any] struct {
	v     T
	key   string
	count int
}

// group is one batch taken from the watcher.
type group[T any] struct {
	received []T // a copy, for the Finished hook; nil without one
	n        int // values taken
	left     int // values kept by Select, not yet written or dropped
	cut      bool
}

// newKeyedWriters returns the writers of run, or nil for one writer.
// prepare readies each value kept by the Select hook for its write, on
// the runner's goroutine, in order, and reports whether there is one (a
// sink runner's correlator may skip or merge it); newHandler returns each
// writer's handler.
func newKeyedWriters[T any](run *Runner[T], n int, prepare func(T) (prepared[T], bool), newHandler func() keyedHandler[T]) *keyedWriters[T] {
	if n <= 1 {
		return nil
	}
	kw := &keyedWriters[T]{run: run, prepare: prepare, newHandler: newHandler, n: n, batch: run.batch,
		keep: run.hooks.finished != nil, keys: make(map[string]*keyQueue[T])}
	kw.limit = max(run.w.q, n*run.batch)
	kw.room.L = &kw.mu
	return kw
}

// dispatch is the runner's goroutine: it takes values from the watcher, a
// batch at a time, while fewer than limit are held, until the watcher is stopped and
// drained, and then waits for the writers to finish.
func (kw *keyedWriters[T]) dispatch() {
	run := kw.run
	buf := make([]T, kw.batch) // a batch at a time, as with one writer: Finished's granularity
	for {
		room := kw.waitRoom()
		n, err := run.w.Recv(context.Background(), buf[:min(room, kw.batch)])
		if err != nil {
			break
		}
		run.received.Add(uint64(n))
		kw.accept(buf[:n])
		clear(buf[:n])
	}
	kw.wg.Wait()
}

// waitRoom waits until fewer than limit values are held and returns how
// many more may be.
func (kw *keyedWriters[T]) waitRoom() int {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	for kw.held >= kw.limit {
		kw.room.Wait()
	}
	return kw.limit - kw.held
}

// accept queues the values of received that Select keeps, each under its
// key, as one group. After the runner's context has ended they are
// dropped as DropShutdown instead.
func (kw *keyedWriters[T]) accept(received []T) {
	run := kw.run
	shutdown := run.sinkCtx.Err() != nil
	vs, ok := run.pick(received)
	cut := false
	switch {
	case !ok:
		vs = nil
	case shutdown:
		run.drop(DropShutdown, vs, nil)
		vs, cut = nil, true
	}
	ps := kw.scratch[:0]
	for _, v := range vs {
		if p, ok := kw.prepare(v); ok {
			ps = append(ps, p)
		}
	}
	kw.scratch = ps
	clear(run.picked)
	if len(ps) == 0 && kw.settleAtOnce(received, cut) {
		return
	}
	g := &group[T]{n: len(received), cut: cut}
	if kw.keep {
		g.received = slices.Clone(received)
	}
	kw.mu.Lock()
	kw.groups = append(kw.groups, g)
	for _, p := range ps {
		kw.enqueue(p.key, keyedValue[T]{p.v, p.count, g})
	}
	g.left = len(ps)
	kw.held += g.left
	kw.queued.Add(int64(g.left))
	empty := g.left == 0
	kw.mu.Unlock()
	clear(ps)
	if empty {
		kw.settle()
	}
}

// settleAtOnce settles a batch with nothing to write (merged, skipped or
// dropped, as a sink runner's repeats mostly are) without making it a
// group, when no earlier group is left to settle and no writer is
// settling one: every earlier batch is then settled, and it is next. It
// reports whether it did. Only dispatch adds groups, so that no writer
// can find one to settle meanwhile. A group and its settling took two
// more locks and an allocation per batch.
func (kw *keyedWriters[T]) settleAtOnce(received []T, cut bool) bool {
	kw.mu.Lock()
	next := len(kw.groups) == 0 && !kw.settling
	kw.mu.Unlock()
	if !next {
		return false
	}
	run := kw.run
	run.cut = run.cut || cut
	run.finish(received)
	run.markHandled(uint64(len(received)))
	return true
}

// batchKey is the prepare function of a batch runner: key orders the
// writes.
func batchKey[T any](run *Runner[T], key func(T) string) func(T) (prepared[T], bool) {
	return func(v T) (prepared[T], bool) {
		k, ok := run.keyOf(key, v)
		return prepared[T]{v: v, key: k}, ok
	}
}

// keyOf returns key(v); a key function that panics drops v (DropPanic),
// and ok is false.
func (run *Runner[T]) keyOf(key func(T) string, v T) (k string, ok bool) {
	if err := guard.Call(func() { k = key(v) }); err != nil {
		run.w.b.countPanic()
		run.drop(DropPanic, []T{v}, err)
		return "", false
	}
	return k, true
}

// enqueue appends kv to key's queue; a key that had nothing queued and no
// writer becomes ready. Caller holds mu.
func (kw *keyedWriters[T]) enqueue(key string, kv keyedValue[T]) {
	q := kw.keys[key]
	if q == nil {
		q = kw.queueFor(key)
		kw.keys[key] = q
	}
	q.items = append(q.items, kv)
	if !q.busy && len(q.items)-q.head == 1 {
		kw.ready = append(kw.ready, q)
		kw.wake()
	}
}

// queueFor returns an empty queue for key, a spare one if there is one.
func (kw *keyedWriters[T]) queueFor(key string) *keyQueue[T] {
	if n := len(kw.spare); n > 0 {
		q := kw.spare[n-1]
		kw.spare[n-1] = nil
		kw.spare = kw.spare[:n-1]
		q.key = key
		return q
	}
	return &keyQueue[T]{key: key}
}

// wake starts a writer for a key that became ready while fewer than n
// run; otherwise a running writer takes the key when it is done with its
// batch. Caller holds mu.
func (kw *keyedWriters[T]) wake() {
	if kw.writers < kw.n {
		kw.writers++
		kw.wg.Add(1)
		go kw.write()
	}
}

// write is a writer's goroutine: it writes batches of ready keys until
// none is left, and ends; the next key that becomes ready starts a writer
// again (wake). So writers run only while there are writes to make: a
// starting goroutine costs what waking a parked one did, and a runner
// idle after a burst keeps none.
func (kw *keyedWriters[T]) write() {
	defer kw.wg.Done()
	handle := kw.newHandler()
	var b writerBatch[T]
	kw.mu.Lock()
	for {
		if len(kw.ready) == 0 {
			kw.writers--
			kw.mu.Unlock()
			return
		}
		kw.take(&b)
		kw.mu.Unlock()
		cut := kw.writeOut(handle, &b)
		kw.mu.Lock()
		kw.release(&b, cut)
		kw.mu.Unlock()
		kw.settle()
		kw.mu.Lock()
	}
}

// writerBatch is what a writer holds: the keys it took and their values.
type writerBatch[T any] struct {
	keys   []*keyQueue[T]
	values []T
	counts []int
	groups []*group[T]
}

// take fills b from the oldest ready keys, up to batch values, and holds
// those keys. Caller holds mu.
func (kw *keyedWriters[T]) take(b *writerBatch[T]) {
	for len(kw.ready) > 0 && len(b.values) < kw.batch {
		q := kw.ready[0]
		kw.ready[0] = nil
		kw.ready = kw.ready[1:]
		q.busy = true
		b.keys = append(b.keys, q)
		end := min(len(q.items), q.head+kw.batch-len(b.values))
		for _, kv := range q.items[q.head:end] {
			b.values = append(b.values, kv.v)
			b.counts = append(b.counts, kv.count)
			b.groups = append(b.groups, kv.g)
		}
		clear(q.items[q.head:end])
		q.head = end
		q.compact()
	}
	kw.queued.Add(-int64(len(b.values)))
	kw.run.inflight.Add(int64(len(b.values)))
}

// compactFrom is the taken values a key's queue holds at least before it
// compacts (see compact).
const compactFrom = 64

// compact moves a busy key's queued values to the front of its slice once
// the values taken before them fill half of it. A key that never runs
// empty (written slower than it is recorded) is reset only when it does
// (release), and append would otherwise keep copying its dead prefix,
// growing with every value it ever held rather than with the runner's
// bound. Amortised, a value is moved once.
func (q *keyQueue[T]) compact() {
	if q.head < compactFrom || q.head*2 < len(q.items) {
		return
	}
	n := copy(q.items, q.items[q.head:])
	clear(q.items[n:])
	q.items, q.head = q.items[:n], 0
}

// writeOut writes values with handle, or, once the runner's context has
// ended, drops them as DropShutdown, and reports whether values were lost
// to the runner's stop.
func (kw *keyedWriters[T]) writeOut(handle keyedHandler[T], b *writerBatch[T]) (cut bool) {
	if kw.run.sinkCtx.Err() != nil {
		kw.run.drop(DropShutdown, b.values, nil)
		return true
	}
	return handle(b.values, b.counts)
}

// release gives back the keys of b, ready again if values came for them,
// counts b's values done in their groups and empties b. Caller holds mu.
func (kw *keyedWriters[T]) release(b *writerBatch[T], cut bool) {
	for _, q := range b.keys {
		q.busy = false
		switch {
		case q.head < len(q.items):
			kw.ready = append(kw.ready, q)
			kw.wake()
		default:
			delete(kw.keys, q.key)
			q.items, q.head, q.key = q.items[:0], 0, ""
			kw.spare = append(kw.spare, q)
		}
	}
	for _, g := range b.groups {
		g.left--
		g.cut = g.cut || cut
	}
	n := len(b.values)
	kw.held -= n
	kw.run.inflight.Add(-int64(n))
	kw.room.Signal()
	clear(b.keys)
	clear(b.values)
	clear(b.groups)
	b.keys, b.values, b.counts, b.groups = b.keys[:0], b.values[:0], b.counts[:0], b.groups[:0]
}

// settle reports the groups done, in the order they were taken: the
// Finished hook (until a group was cut) and Flush's count. One goroutine
// settles at a time; one that finds another settling leaves it the groups
// it finished, which the settler sees when it looks again.
func (kw *keyedWriters[T]) settle() {
	kw.mu.Lock()
	if kw.settling {
		kw.mu.Unlock()
		return
	}
	kw.settling = true
	for {
		i := 0
		for i < len(kw.groups) && kw.groups[i].left == 0 {
			i++
		}
		if i == 0 {
			break
		}
		kw.settled = append(kw.settled[:0], kw.groups[:i]...)
		clear(kw.groups[:i])
		kw.groups = kw.groups[i:]
		kw.mu.Unlock()
		for _, g := range kw.settled {
			kw.run.cut = kw.run.cut || g.cut
			kw.run.finish(g.received)
			kw.run.markHandled(uint64(g.n))
		}
		clear(kw.settled)
		kw.mu.Lock()
	}
	kw.settling = false
	kw.mu.Unlock()
}
