package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// The history tests run a broadcaster under concurrent clients, record
// every call with its arguments, result, and call and return times, and
// check with porcupine that the history is linearizable against the
// sequential specification in history_model_test.go. Each seed is one
// history:
//
//   - 2-3 publishers, each making 2-6 calls of Action, ActionContext,
//     ActionOrDrop, ActionBatch, ActionBatchContext, ActionSeq or
//     ActionBatchSeq (batches of 2-4 values); the contexts never end, end
//     after 20µs-1ms, or are already done. Every value is unique (the
//     publisher's number and a counter), so a read names its publish.
//   - 2-3 watcher clients, each registering 1-3 watchers one after the
//     other, each of a random behaviour (WaitIfChannelFull,
//     EvictIfChannelFull, DropIfChannelFull, DropOldestIfChannelFull,
//     WaitTimeoutIfChannelFull of 20-500µs), queue length 1-3 or a
//     hand-off (0), a replay of the broadcaster's history of 0-3 values,
//     with or without a drop handler (which decides between the lazy and
//     the per-value drop paths). Each reads with Recv (1-4 values), Next or
//     a receive from ResultChan, with a context that never ends, ends soon
//     or is already done; may switch to ResultChan before or between
//     reads; may Stop; and is read until it closes. Each watcher's Stats
//     are recorded once every client is done (see runHistory for why).
//     On a channel, Recv is several receives, each atomic on its own, so
//     its values are recorded as reads of one value each.
//   - Every client sometimes records Stats or Taken; one more client calls
//     Shutdown once the publishers are done, or earlier, once a random
//     number of operations were recorded (one seed in three).
//
// Nothing waits on time: the contexts only bound calls. Nothing can hang:
// a WaitIfChannelFull watcher that is not stopped is read until Shutdown
// closes it, so publishers always get room; everything else ends with
// Shutdown, which comes once the publishers are done. A lost wake-up would
// hang the clients: after fanouttest.HangGuard the test calls Shutdown to
// release them and fails with the history so far.
//
// What is checked (see history_model_test.go): one total order of accepted
// values; registration ordered with values; lossless watchers get exactly
// the values accepted after they registered (and their replay), in order,
// no gap, no duplicate, until they close; lossy watchers an in-order
// subsequence without duplicates, with every other value counted as a drop
// by the end (Watcher.Stats); WaitIfChannelFull watchers' queue lengths
// (no value is accepted while one is full) and EvictIfChannelFull evictions
// (exactly when a value meets a full queue; a channel watcher's channel
// closed by the time the evicting publish returns); batches contiguous; failed
// publishes accept nothing (the documented early hand-outs to channel
// watchers aside); ActionSeq's sequence numbers; a read that times out
// found nothing; close reasons (ErrWatcherStopped, ErrStopped, ErrEvicted)
// only once drained; nothing accepted and no Watch after Shutdown;
// Stats.Accepted, Refused and Watchers; Taken never decreasing and never
// ahead of a lossless watcher. The drop handlers' calls are compared with
// the drop counters once the clients are done.
//
// What is not checked: which values a lossy watcher loses (that depends
// on when its consumer runs); why ActionOrDrop refused (another
// publisher's turn is not observable); whether a publisher that could have
// gone on did (waiting is not an observable result, only its end); the
// queue lengths of the lossy watchers; values with WatchWithPrefix,
// WithCommit and custom behaviours (the sequential model test covers them).
//
// TestHistoriesAreLinearizable checks a fixed set of seeds in every test
// run; FuzzHistories checks as many as it is given time for:
//
//	go test -run '^$' -fuzz FuzzHistories -fuzztime 10m .
//
// A history that is not linearizable is written as porcupine's HTML
// visualization to a temporary file, whose path the failure gives.

// historySeeds is how many histories TestHistoriesAreLinearizable checks.
const historySeeds = 100

func TestHistoriesAreLinearizable(t *testing.T) {
	n := historySeeds
	if testing.Short() {
		n = 20
	}
	for seed := range uint64(n) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runHistory(t, seed) })
	}
}

func FuzzHistories(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { runHistory(t, seed) })
}

// histRun records one history.
type histRun struct {
	t       testing.TB
	b       *fanout.Broadcaster[uint64]
	history int // the broadcaster's WithHistory
	clock   atomic.Int64

	// Shutdown comes early once target operations were recorded.
	nops   atomic.Int64
	target int64
	early  chan struct{}
	shut   chan struct{} // closed once Shutdown returned

	mu    sync.Mutex
	ops   []porcupine.Operation
	model historyModel
	ws    []*fanout.Watcher[uint64]
	drops []*atomic.Uint64 // drop handler calls, per watcher
}

// now returns the next timestamp: a counter, so that the order of the
// timestamps is the order of the calls and returns in real time.
func (h *histRun) now() int64 { return h.clock.Add(1) }

func (h *histRun) record(client int, in hInput, out hOutput, call, ret int64) {
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	if in.Op == opPublish { // the model needs its return time (undelivered)
		vi := h.model.vals[in.V]
		vi.ret = in.T
		h.model.vals[in.V] = vi
	}
	h.mu.Unlock()
	if h.nops.Add(1) == h.target {
		close(h.early)
	}
}

func (h *histRun) code(err error) errCode {
	switch {
	case err == nil:
		return errNone
	case errors.Is(err, fanout.ErrStopped):
		return errStopped
	case errors.Is(err, fanout.ErrWatcherStopped):
		return errWatcherStopped
	case errors.Is(err, fanout.ErrEvicted):
		return errEvicted
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errCtx
	}
	h.t.Errorf("unexpected error: %v", err)
	return errNone
}

// between runs between two calls of a client: it yields the processor half
// the time, so that the clients' calls interleave more than the scheduler
// alone would make them (not to wait for anything), and records Stats or
// Taken once in eight calls.
func (h *histRun) between(client int, r *rand.Rand) {
	if r.IntN(2) == 0 {
		runtime.Gosched()
	}
	switch r.IntN(16) {
	case 0:
		call := h.now()
		s := h.b.Stats()
		ret := h.now()
		h.record(client, hInput{Op: opStats}, hOutput{N: s.Accepted, Refused: s.Refused, Watchers: uint64(s.Watchers)}, call, ret)
	case 1:
		call := h.now()
		n := h.b.Taken()
		ret := h.now()
		h.record(client, hInput{Op: opTaken}, hOutput{N: n}, call, ret)
	}
}

// publisher makes calls publish calls, of unique values.
func (h *histRun) publisher(p int, r *rand.Rand, calls int) {
	var next uint64
	val := func(mode pubMode, prev uint64) uint64 {
		next++
		v := uint64(p+1)<<16 | next
		h.mu.Lock()
		h.model.vals[v] = valInfo{mode: mode, prev: prev}
		h.mu.Unlock()
		return v
	}
	batch := func(mode pubMode) []uint64 {
		vs := make([]uint64, 2+r.IntN(3))
		prev := uint64(0)
		for i := range vs {
			vs[i] = val(mode, prev)
			prev = vs[i]
		}
		return vs
	}
	for range calls {
		h.between(p, r)
		ctx, cancel, mode, done := publishCtx(r)
		switch r.IntN(7) {
		case 0:
			v := val(modeAction, 0)
			call := h.now()
			err := h.b.Action(v)
			h.published(p, []uint64{v}, accepted(err), err, -1, false, call, h.now())
		case 1:
			v := val(mode, 0)
			call := h.now()
			err := h.b.ActionContext(ctx, v)
			h.published(p, []uint64{v}, accepted(err), err, -1, done, call, h.now())
		case 2:
			v := val(modeTry, 0)
			call := h.now()
			ok, err := h.b.ActionOrDrop(v)
			ret := h.now()
			out := hOutput{Err: h.code(err), Seq: -1}
			if !ok && err == nil {
				out.Err = errRefused
			}
			if ok != (err == nil && out.Err == errNone) {
				h.t.Errorf("ActionOrDrop = %v, %v", ok, err)
			}
			h.record(p, hInput{Op: opPublish, V: v, T: ret}, out, call, ret)
		case 3:
			vs := batch(modeAction)
			call := h.now()
			n, err := h.b.ActionBatch(vs)
			h.published(p, vs, n, err, -1, false, call, h.now())
		case 4:
			vs := batch(mode)
			call := h.now()
			n, err := h.b.ActionBatchContext(ctx, vs)
			h.published(p, vs, n, err, -1, done, call, h.now())
		case 5:
			v := val(mode, 0)
			call := h.now()
			seq, err := h.b.ActionSeq(ctx, v)
			h.published(p, []uint64{v}, accepted(err), err, int64(seq), done, call, h.now())
		case 6:
			vs := batch(mode)
			call := h.now()
			first, n, err := h.b.ActionBatchSeq(ctx, vs)
			h.published(p, vs, n, err, int64(first), done, call, h.now())
		}
		cancel()
	}
}

// accepted is how many values a publish call of one value accepted.
func accepted(err error) int {
	if err != nil {
		return 0
	}
	return 1
}

// publishCtx returns a context for a publish that takes one, the mode it
// makes the publish, and whether it is already done.
func publishCtx(r *rand.Rand) (context.Context, context.CancelFunc, pubMode, bool) {
	switch r.IntN(6) {
	case 0, 1:
		return context.Background(), func() {}, modeAction, false
	case 2:
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel, modeStrict, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+r.IntN(1000))*time.Microsecond)
	return ctx, cancel, modeStrict, false
}

// published records the values of one publish call: the first n accepted
// (with first+i as sequence numbers, if first >= 0), the others failed
// with err. Only the first failed one may have been handed out.
func (h *histRun) published(client int, vs []uint64, n int, err error, first int64, done bool, call, ret int64) {
	if (n < len(vs)) != (err != nil) {
		h.t.Errorf("publish of %d values accepted %d: %v", len(vs), n, err)
	}
	for i, v := range vs {
		out := hOutput{Seq: -1}
		if i < n {
			if first >= 0 {
				out.Seq = first + int64(i)
			}
		} else {
			out.Err = h.code(err)
			out.Offered = i == n && !done
		}
		h.record(client, hInput{Op: opPublish, V: v, T: ret}, out, call, ret)
	}
}

// randomWatcher returns a watcher configuration.
func randomWatcher(r *rand.Rand, history int) watchInfo {
	// The two that make publishers wait come twice as often.
	kinds := [...]wKind{wkWait, wkWait, wkTimeout, wkTimeout, wkEvict, wkDropNew, wkDropOldest}
	wi := watchInfo{kind: kinds[r.IntN(len(kinds))], q: 1 + r.IntN(3), handler: r.IntN(2) == 0}
	switch {
	case (wi.kind == wkWait || wi.kind == wkDropNew) && r.IntN(5) == 0:
		wi.q = 0 // a hand-off
	case history > 0 && r.IntN(3) == 0:
		wi.replay = 1 + r.IntN(history)
	}
	return wi
}

// watcher registers watchers one after the other and reads them.
func (h *histRun) watcher(c int, r *rand.Rand) {
	for range 1 + r.IntN(3) {
		if !h.session(c, r) {
			return
		}
	}
}

// session registers one watcher and reads it until it closes. It reports
// whether the client may register another.
func (h *histRun) session(c int, r *rand.Rand) bool {
	wi := randomWatcher(r, h.history)
	opts := []fanout.Option{fanout.WithQueueLength(wi.q), fanout.WithReplay(wi.replay)}
	switch wi.kind {
	case wkWait:
		opts = append(opts, fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull))
	case wkEvict:
		opts = append(opts, fanout.WithFullChannelBehavior(fanout.EvictIfChannelFull))
	case wkDropNew:
		opts = append(opts, fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
	case wkDropOldest:
		opts = append(opts, fanout.WithFullChannelBehavior(fanout.DropOldestIfChannelFull))
	case wkTimeout:
		d := time.Duration(20+r.IntN(480)) * time.Microsecond
		opts = append(opts, fanout.WithFullChannelBehavior(fanout.WaitTimeoutIfChannelFull(d)))
	}
	calls := new(atomic.Uint64)
	if wi.handler {
		opts = append(opts, fanout.WithDropHandler(func(fanout.Drop) { calls.Add(1) }))
	}
	h.mu.Lock()
	id := len(h.model.watchers)
	h.model.watchers = append(h.model.watchers, wi)
	h.ws = append(h.ws, nil)
	h.drops = append(h.drops, calls)
	h.mu.Unlock()

	call := h.now()
	w, err := h.b.Watch(opts...)
	h.record(c, hInput{Op: opWatch, W: id}, hOutput{Err: h.code(err)}, call, h.now())
	if err != nil {
		return false
	}
	h.mu.Lock()
	h.ws[id] = w
	h.mu.Unlock()
	onChan := wi.q == 0
	toChan := func() {
		call := h.now()
		w.ResultChan()
		h.record(c, hInput{Op: opResultChan, W: id}, hOutput{}, call, h.now())
		onChan = true
	}
	if !onChan && r.IntN(3) == 0 {
		toChan()
	}
	stop := r.IntN(2) == 0
	for range r.IntN(10) {
		h.between(c, r)
		if !onChan && r.IntN(8) == 0 {
			toChan()
		}
		if reason := h.read(c, id, w, onChan, r, false); reason != errNone {
			return reason != errStopped
		}
	}
	if stop {
		call := h.now()
		w.Stop()
		h.record(c, hInput{Op: opStop, W: id}, hOutput{}, call, h.now())
	} else if wi.kind != wkWait {
		<-h.shut // it holds no publisher up: read what is left after Shutdown
	}
	for {
		if reason := h.read(c, id, w, onChan, r, true); reason != errNone {
			return reason != errStopped
		}
	}
}

// read records one read of w, with a random context unless wait is set,
// and returns the close reason it returned, if any.
func (h *histRun) read(c, id int, w *fanout.Watcher[uint64], onChan bool, r *rand.Rand, wait bool) errCode {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if !wait {
		switch r.IntN(4) {
		case 0:
			ctx, cancel = context.WithCancel(ctx)
			cancel()
		case 1:
			ctx, cancel = context.WithTimeout(ctx, time.Duration(20+r.IntN(500))*time.Microsecond)
		}
	}
	defer cancel()
	var vals []uint64
	var err error
	call := h.now()
	switch {
	case onChan && r.IntN(2) == 0:
		vals, err = receive(ctx, w)
	case r.IntN(2) == 0:
		var v uint64
		if v, err = w.Next(ctx); err == nil {
			vals = []uint64{v}
		}
	default:
		buf := make([]uint64, 1+r.IntN(4))
		var n int
		n, err = w.Recv(ctx, buf)
		vals = buf[:n]
	}
	ret := h.now()
	out := hOutput{Err: h.code(err), Vals: vals}
	if onChan && len(vals) > 1 {
		// On a channel, Recv is a receive, then more that do not wait,
		// each one atomic on its own: values may arrive in between.
		for _, v := range vals {
			h.record(c, hInput{Op: opRead, W: id, T: call}, hOutput{Vals: []uint64{v}}, call, ret)
		}
		return errNone
	}
	h.record(c, hInput{Op: opRead, W: id, T: call}, out, call, ret)
	if out.Err == errCtx {
		return errNone
	}
	return out.Err
}

// receive takes one value from w's channel, as a consumer of ResultChan
// does: what is there first, then waiting until ctx ends (a select with a
// done context picks at random between it and a value).
func receive(ctx context.Context, w *fanout.Watcher[uint64]) ([]uint64, error) {
	ch := w.ResultChan()
	var v uint64
	var ok bool
	select {
	case v, ok = <-ch:
	default:
		select {
		case v, ok = <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if !ok {
		return nil, w.Err()
	}
	return []uint64{v}, nil
}

func (h *histRun) watcherStats(c, id int, w *fanout.Watcher[uint64]) {
	call := h.now()
	s := w.Stats()
	h.record(c, hInput{Op: opWStats, W: id}, hOutput{Delivered: s.Delivered, Dropped: s.Dropped,
		Evicted: s.DroppedEvicted, Queued: uint64(s.Queued)}, call, h.now())
}

// shutdowner calls Shutdown once the publishers are done or the early
// target is reached.
func (h *histRun) shutdowner(c int, r *rand.Rand, published <-chan struct{}) {
	h.between(c, r)
	select {
	case <-published:
	case <-h.early:
	}
	for i := range 1 + r.IntN(2) { // idempotent
		call := h.now()
		h.b.Shutdown()
		ret := h.now()
		h.record(c, hInput{Op: opShutdown}, hOutput{}, call, ret)
		h.record(c, hInput{Op: opShutdownDone}, hOutput{}, ret, ret)
		if i == 0 {
			close(h.shut)
		}
		h.between(c, r)
	}
}

// runHistory records the history of seed and checks it.
func runHistory(t testing.TB, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x68697374))
	h := &histRun{t: t, history: r.IntN(4), early: make(chan struct{}), shut: make(chan struct{}),
		model: historyModel{vals: map[uint64]valInfo{}}}
	if r.IntN(3) == 0 {
		h.target = int64(10 + r.IntN(60))
	}
	h.b = fanout.New[uint64](fanout.WithHistory(h.history))
	npub, nwatch := 2+r.IntN(2), 2+r.IntN(2)
	var pubs, all sync.WaitGroup
	published, start := make(chan struct{}), make(chan struct{})
	for p := range npub {
		pr, calls := rand.New(rand.NewPCG(seed, r.Uint64())), 2+r.IntN(5)
		pubs.Go(func() {
			<-start
			h.publisher(p, pr, calls)
		})
	}
	all.Go(func() {
		pubs.Wait()
		close(published)
	})
	for c := range nwatch {
		wr := rand.New(rand.NewPCG(seed, r.Uint64()))
		all.Go(func() {
			<-start
			h.watcher(npub+c, wr)
		})
	}
	sr := rand.New(rand.NewPCG(seed, r.Uint64()))
	all.Go(func() { h.shutdowner(npub+nwatch, sr, published) })
	close(start) // the clients start together
	finished := make(chan struct{})
	go func() {
		all.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(fanouttest.HangGuard): // a guard, not a timing assertion
		h.b.Shutdown() // releases every client, unless that hangs too
		<-finished
		h.mu.Lock()
		defer h.mu.Unlock()
		t.Fatalf("the clients did not finish within %v (a lost wake-up?); released by Shutdown; history so far:\n%s",
			fanouttest.HangGuard, describeHistory(&h.model, h.ops))
	}

	// The watchers' counters once every call has returned: a publisher
	// that waits for full channel watchers counts a value it sent into one
	// of them only when its whole wait ends, so until then that watcher's
	// Delivered can lag what its consumer received (and it does).
	for id, w := range h.ws {
		if w != nil {
			h.watcherStats(npub+nwatch, id, w)
		}
	}
	for id, w := range h.ws {
		if w != nil && h.model.watchers[id].handler {
			if calls, dropped := h.drops[id].Load(), w.Stats().Dropped; calls != dropped {
				t.Errorf("watcher %d: %d drop handler calls for %d drops", id, calls, dropped)
			}
		}
	}
	checkHistory(t, &h.model, h.ops)
}
