package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
)

// The model test drives a broadcaster from one goroutine with a sequence of
// operations decoded from bytes, and checks every observable result against a
// plain reference model: what each watcher holds, what each read returns,
// ActionOrDrop's verdicts, batches, replayed history, the drop counters and
// the drop handler's calls, the delivered counts, and how watchers close. The
// watchers cover every behaviour, read through the shared ring (pull) or a
// channel, with and without a drop handler (without one, the lossy built-ins
// settle their drops lazily), with queues small and large (a large one grows
// the ring). It runs as a fuzz target (go test -fuzz FuzzModel) and, in every
// test run, over its seeds and a batch of random sequences.

type modelWatcher struct {
	w         *fanout.Watcher[int]
	q         int
	beh       int // index into modelBehaviors
	useChan   bool
	handler   bool
	queue     []int
	closed    error
	delivered uint64
	dropFull  uint64
	dropOld   uint64
	dropEvic  uint64
	dropTime  uint64
	calls     *[8]uint64 // drop handler calls per reason
	mod       int        // WithFilter keeping multiples of mod; 0: no filter
	filtered  uint64
}

// keeps reports whether the watcher's filter keeps v.
func (mw *modelWatcher) keeps(v int) bool { return mw.mod == 0 || v%mw.mod == 0 }

var modelBehaviors = []fanout.FullChannelBehavior{
	fanout.WaitIfChannelFull,
	fanout.DropIfChannelFull,
	fanout.DropOldestIfChannelFull,
	fanout.EvictIfChannelFull,
	verdictBehavior(fanout.VerdictWait), // user-defined: never on a fast path
	verdictBehavior(fanout.VerdictDropFull),
	verdictBehavior(fanout.VerdictDropOldest),
	verdictBehavior(fanout.VerdictEvict),
	negativeTimeout{},  // a wait that never waits: the value is missed
	alternatingDrops{}, // drop-new and drop-oldest in turn
}

// verdictBehavior is a user-defined behaviour that always returns one
// verdict; the model treats it like the built-in with that verdict.
type verdictBehavior fanout.Verdict

func (v verdictBehavior) OnFull(fanout.FullState) fanout.Decision {
	return fanout.Decision{Verdict: fanout.Verdict(v)}
}

// negativeTimeout waits with a negative timeout: do not wait at all.
type negativeTimeout struct{}

func (negativeTimeout) OnFull(fanout.FullState) fanout.Decision {
	return fanout.Decision{Verdict: fanout.VerdictWait, Timeout: -time.Second}
}

// alternatingDrops drops the new value when the watcher has missed an even
// number of values so far, and the oldest one otherwise.
type alternatingDrops struct{}

func (alternatingDrops) OnFull(s fanout.FullState) fanout.Decision {
	if s.Dropped%2 == 0 {
		return fanout.Decision{Verdict: fanout.VerdictDropFull}
	}
	return fanout.Decision{Verdict: fanout.VerdictDropOldest}
}

// Model kinds of behaviour.
const (
	kWait = iota
	kDropNew
	kDropOldest
	kEvict
	kNegTimeout
	kAlternate
)

// kind maps a behaviour index to the kind it behaves like.
func kind(beh int) int {
	switch {
	case beh < 8:
		return beh % 4
	case beh == 8:
		return kNegTimeout
	}
	return kAlternate
}

type model struct {
	t        *testing.T
	b        *fanout.Broadcaster[int]
	ws       []*modelWatcher
	history  int // the broadcaster's WithHistory
	accepts  []int
	stopped  bool
	next     int
	accepted uint64
	refused  uint64
	log      []string
}

func (m *model) fail(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("%s\nops:\n  %s", fmt.Sprintf(format, args...), joinLines(m.log))
}

func joinLines(l []string) string {
	s := ""
	for i, x := range l {
		if i > 0 {
			s += "\n  "
		}
		s += x
	}
	return s
}

// fits returns how many of vs, in order, can be published now without
// waiting: a waiting watcher needs room only for the values it keeps.
func (m *model) fits(vs []int) int {
	n := len(vs)
	for _, mw := range m.ws {
		if mw.closed != nil || kind(mw.beh) != kWait {
			continue
		}
		room := mw.q - len(mw.queue)
		for i, v := range vs[:n] {
			if mw.keeps(v) {
				if room == 0 {
					n = i
					break
				}
				room--
			}
		}
	}
	return n
}

// wouldWait reports whether publishing v now would make the publisher wait.
func (m *model) wouldWait(v int) bool { return m.fits([]int{v}) == 0 }

func (m *model) deliver(v int) {
	m.accepted++
	m.accepts = append(m.accepts, v)
	for _, mw := range m.ws {
		if mw.closed != nil {
			continue
		}
		if !mw.keeps(v) {
			mw.filtered++
			continue
		}
		if len(mw.queue) < mw.q {
			mw.queue = append(mw.queue, v)
			continue
		}
		k := kind(mw.beh)
		if k == kAlternate {
			k = kDropNew
			if (mw.dropFull+mw.dropOld)%2 == 1 {
				k = kDropOldest
			}
		}
		switch k {
		case kDropNew:
			mw.dropFull++
		case kDropOldest:
			mw.queue = append(mw.queue[1:], v)
			mw.dropOld++
		case kEvict:
			mw.dropEvic++
			mw.closed = fanout.ErrEvicted
		case kNegTimeout:
			mw.dropTime++
		}
	}
}

func (m *model) step(op, arg byte) {
	m.t.Helper()
	switch op % 10 {
	case 0, 7:
		m.watch(op, arg)
	case 1, 2:
		m.publishOne(op%10 == 2)
	case 8, 9: // a batch: small, or a burst that laps the ring
		k := 1 + int(arg%20)
		if op%10 == 9 {
			k = 40 + int(arg)
		}
		m.publishBatch(k)
	case 3: // read up to k values without waiting
		if len(m.ws) == 0 {
			return
		}
		mw := m.ws[int(arg)%len(m.ws)]
		k := 1 + int(arg/16)%4
		got := m.read(mw, k)
		want := mw.queue[:min(k, len(mw.queue))]
		if mw.mod != 0 && !mw.useChan && len(got) > 0 && len(got) < len(want) {
			// A filtered pull reader returns once its filter kept a
			// value: a shorter read is a prefix of what is queued.
			want = want[:len(got)]
		}
		m.log = append(m.log, fmt.Sprintf("read w%d k=%d -> %v", mw.w.ID(), k, got))
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			m.fail("watcher %d read %v, want %v", mw.w.ID(), got, want)
		}
		mw.queue = mw.queue[len(want):]
		mw.delivered += uint64(len(want))
	case 4: // Stop
		if len(m.ws) == 0 {
			return
		}
		mw := m.ws[int(arg)%len(m.ws)]
		m.log = append(m.log, fmt.Sprintf("stop w%d", mw.w.ID()))
		mw.w.Stop()
		if mw.closed == nil && !m.stopped {
			mw.closed = fanout.ErrWatcherStopped
		}
	case 5: // Shutdown, rarely
		if arg%8 != 0 {
			return
		}
		m.log = append(m.log, "shutdown")
		m.b.Shutdown()
		if !m.stopped {
			for _, mw := range m.ws {
				if mw.closed == nil {
					mw.closed = fanout.ErrStopped
				}
			}
		}
		m.stopped = true
	case 6: // ResultChan on a pull watcher mid-stream
		if len(m.ws) == 0 {
			return
		}
		mw := m.ws[int(arg)%len(m.ws)]
		m.log = append(m.log, fmt.Sprintf("resultchan w%d", mw.w.ID()))
		mw.w.ResultChan()
		mw.useChan = true
	}
	m.checkStats()
}

// watch registers a watcher: the arg byte gives its queue length, behaviour
// and read path, the op byte's high bits a drop handler, a replay and a
// large queue.
func (m *model) watch(op, arg byte) {
	if len(m.ws) >= 6 {
		return
	}
	q := 1 + int(arg%4)
	if op&0x80 != 0 {
		q = 60 + int(arg) // larger than the ring's minimum: the ring grows
	}
	mw := &modelWatcher{q: q, beh: int(arg/4) % len(modelBehaviors), useChan: arg&0x80 != 0,
		handler: op&0x10 != 0, calls: new([8]uint64)}
	if op&0x08 != 0 {
		mw.mod = 2 + int(arg&1) // keeps multiples of 2 or 3
	}
	replay := int(op>>5) & 3
	opts := []fanout.Option{fanout.WithQueueLength(q), fanout.WithFullChannelBehavior(modelBehaviors[mw.beh])}
	if mw.handler {
		calls := mw.calls
		opts = append(opts, fanout.WithDropHandler(func(d fanout.Drop) { calls[d.Reason]++ }))
	}
	if replay > 0 {
		opts = append(opts, fanout.WithReplay(replay))
	}
	if mw.mod > 0 {
		mod := mw.mod
		opts = append(opts, fanout.WithFilter(func(v int) bool { return v%mod == 0 }))
	}
	var prefix []int
	if op%10 == 7 {
		prefix = []int{} // WatchWithPrefix, sometimes with an empty prefix
		for i := range int(arg>>5) % 4 {
			prefix = append(prefix, -1-i)
		}
	}
	replayed := m.accepts[len(m.accepts)-min(replay, len(m.accepts)):]
	start := append(slices.Clone(prefix), replayed...)
	if prefix != nil || len(start) > 0 {
		mw.q = max(mw.q, len(start)+1) // as in k8s, an empty prefix too
	}
	for _, v := range start {
		if mw.keeps(v) {
			mw.queue = append(mw.queue, v)
		} else {
			mw.filtered++
		}
	}
	m.log = append(m.log, fmt.Sprintf("watch q=%d beh=%v chan=%v handler=%v prefix=%v replay=%d filter=%d",
		q, modelBehaviors[mw.beh], mw.useChan, mw.handler, prefix, replay, mw.mod))
	var w *fanout.Watcher[int]
	var err error
	if prefix != nil {
		w, err = m.b.WatchWithPrefix(prefix, opts...)
	} else {
		w, err = m.b.Watch(opts...)
	}
	switch {
	case replay > m.history: // an invalid option is reported first
		if err == nil || errors.Is(err, fanout.ErrStopped) {
			m.fail("Watch with replay %d beyond history %d: %v", replay, m.history, err)
		}
		return
	case m.stopped:
		if !errors.Is(err, fanout.ErrStopped) {
			m.fail("Watch after Shutdown: %v", err)
		}
		return
	case err != nil:
		m.fail("Watch: %v", err)
	}
	mw.w = w
	if mw.useChan {
		w.ResultChan()
	}
	m.ws = append(m.ws, mw)
}

// publishOne publishes a value with ActionOrDrop, or with Action when that
// would not wait.
func (m *model) publishOne(action bool) {
	v := m.next
	m.next++
	if action && !m.wouldWait(v) {
		m.log = append(m.log, fmt.Sprintf("action %d", v))
		err := m.b.Action(v)
		if m.stopped {
			if !errors.Is(err, fanout.ErrStopped) {
				m.fail("Action after Shutdown: %v", err)
			}
			return
		}
		if err != nil {
			m.fail("Action(%d): %v", v, err)
		}
		m.deliver(v)
		return
	}
	m.log = append(m.log, fmt.Sprintf("actionOrDrop %d", v))
	ok, err := m.b.ActionOrDrop(v)
	switch {
	case m.stopped:
		if ok || !errors.Is(err, fanout.ErrStopped) {
			m.fail("ActionOrDrop after Shutdown: %v %v", ok, err)
		}
	case err != nil:
		m.fail("ActionOrDrop(%d): %v", v, err)
	case m.wouldWait(v):
		if ok {
			m.fail("ActionOrDrop(%d) accepted although a waiting watcher is full", v)
		}
		m.refused++
	default:
		if !ok {
			m.fail("ActionOrDrop(%d) refused although no waiting watcher is full", v)
		}
		m.deliver(v)
	}
}

// publishBatch publishes up to k values with ActionBatch, as many as fit
// without waiting.
func (m *model) publishBatch(k int) {
	vs := make([]int, k)
	for i := range vs {
		vs[i] = m.next + i
	}
	k = m.fits(vs)
	if k <= 0 {
		return
	}
	vs = vs[:k]
	m.next += k
	m.log = append(m.log, fmt.Sprintf("batch %d..%d", vs[0], vs[k-1]))
	n, err := m.b.ActionBatch(vs)
	if m.stopped {
		if n != 0 || !errors.Is(err, fanout.ErrStopped) {
			m.fail("ActionBatch after Shutdown: %d %v", n, err)
		}
		return
	}
	if n != k || err != nil {
		m.fail("ActionBatch(%d values) = %d, %v", k, n, err)
	}
	for _, v := range vs {
		m.deliver(v)
	}
}

// read takes up to k queued values from the watcher without waiting, through
// the watcher's read path.
func (m *model) read(mw *modelWatcher, k int) []int {
	var got []int
	if mw.useChan {
		ch := mw.w.ResultChan()
		for len(got) < k {
			select {
			case v, ok := <-ch:
				if !ok {
					return got
				}
				got = append(got, v)
				continue
			default:
			}
			break
		}
		return got
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	buf := make([]int, k)
	n, _ := mw.w.Recv(ctx, buf)
	return buf[:n]
}

// unseen returns how many of the values queued for a filtered pull reader,
// by its stats s, its filter has not yet seen (so they are neither in the
// model's queue nor filtered): it sees them when the reader reaches them
// or a publisher sifts its full queue. Those it will reject are the ones
// in question; 0 for the other watchers.
func (mw *modelWatcher) unseen(s fanout.WatcherStats) int {
	if mw.mod == 0 || mw.useChan {
		return 0
	}
	return s.Queued - len(mw.queue)
}

func (m *model) checkStats() {
	m.t.Helper()
	for _, mw := range m.ws {
		s := mw.w.Stats()
		unseen := mw.unseen(s)
		if unseen < 0 || s.Queued-unseen != len(mw.queue) || s.DroppedFull != mw.dropFull || s.DroppedOldest != mw.dropOld ||
			s.DroppedEvicted != mw.dropEvic || s.DroppedTimeout != mw.dropTime || s.Delivered != mw.delivered ||
			s.Filtered+uint64(unseen) != mw.filtered {
			m.fail("watcher %d stats %+v, model queue %v delivered=%d filtered=%d drops full=%d oldest=%d evicted=%d timeout=%d",
				mw.w.ID(), s, mw.queue, mw.delivered, mw.filtered, mw.dropFull, mw.dropOld, mw.dropEvic, mw.dropTime)
		}
		c := mw.calls
		if mw.handler && (c[fanout.DropFull] != mw.dropFull || c[fanout.DropOldest] != mw.dropOld ||
			c[fanout.DropEvicted] != mw.dropEvic || c[fanout.DropTimeout] != mw.dropTime) {
			m.fail("watcher %d drop handler calls %v, model drops full=%d oldest=%d evicted=%d timeout=%d",
				mw.w.ID(), c, mw.dropFull, mw.dropOld, mw.dropEvic, mw.dropTime)
		}
	}
	bs := m.b.Stats()
	if bs.Accepted != m.accepted || bs.Refused != m.refused {
		m.fail("broadcaster stats %+v, model accepted=%d refused=%d", bs, m.accepted, m.refused)
	}
}

// finish shuts down and checks that every watcher yields exactly what the
// model holds, then closes with the model's reason.
func (m *model) finish() {
	m.t.Helper()
	m.b.Shutdown()
	for _, mw := range m.ws {
		if mw.closed == nil {
			mw.closed = fanout.ErrStopped
		}
		var got []int
		for {
			vals := m.read(mw, 64)
			got = append(got, vals...)
			if len(vals) == 0 {
				break
			}
		}
		if !slices.Equal(got, mw.queue) && !(len(got) == 0 && len(mw.queue) == 0) {
			m.fail("watcher %d drained %v, want %v", mw.w.ID(), got, mw.queue)
		}
		mw.delivered += uint64(len(got))
		if s := mw.w.Stats(); s.Delivered != mw.delivered || s.Queued != 0 {
			m.fail("watcher %d after draining: stats %+v, want delivered %d", mw.w.ID(), s, mw.delivered)
		}
		if err := mw.w.Err(); !errors.Is(err, mw.closed) {
			m.fail("watcher %d closed with %v, want %v", mw.w.ID(), err, mw.closed)
		}
		if mw.useChan {
			if _, open := <-mw.w.ResultChan(); open {
				m.fail("watcher %d channel still open after Shutdown", mw.w.ID())
			}
		} else if _, err := mw.w.Next(context.Background()); !errors.Is(err, mw.closed) {
			m.fail("watcher %d Next after drain: %v, want %v", mw.w.ID(), err, mw.closed)
		}
	}
}

// runModel runs ops; its first byte sets the broadcaster's history.
func runModel(t *testing.T, ops []byte) {
	m := &model{t: t}
	if len(ops) > 0 {
		m.history = int(ops[0] % 8)
		ops = ops[1:]
	}
	m.b = fanout.New[int](fanout.WithHistory(m.history))
	for i := 0; i+1 < len(ops); i += 2 {
		m.step(ops[i], ops[i+1])
	}
	m.finish()
}

func FuzzModel(f *testing.F) {
	f.Add([]byte{3, 0x70, 0, 1, 0, 1, 0, 0x60, 4, 3, 0})  // replay 3 of history 3
	f.Add([]byte{0, 0x10, 4, 9, 200, 3, 0, 9, 200, 3, 0}) // a drop-new watcher with handler, lapped twice
	f.Add([]byte{0, 0, 8, 9, 200, 3, 0, 9, 200, 3, 0})    // the same without handler: lazy
	f.Add([]byte{0, 0x80, 4, 9, 255, 9, 255, 3, 0})       // a large queue grows the ring
	f.Add([]byte{0, 0, 0, 1, 0, 1, 0, 3, 0})
	f.Add([]byte{0, 0, 4, 0, 8, 0, 12, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 3, 0x31, 4, 1, 1, 0, 3, 0x32})
	f.Add([]byte{0, 0, 0x81, 0, 0x05, 2, 0, 2, 0, 2, 0, 6, 0, 1, 0, 3, 0x10, 5, 0, 1, 0})
	f.Add([]byte{0, 0, 3, 1, 0, 1, 0, 1, 0, 1, 0, 6, 0, 3, 0x30, 1, 0, 4, 0, 3, 0x30})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 401 {
			ops = ops[:401]
		}
		runModel(t, ops)
	})
}

// TestModelRandom runs the model over random operation sequences in every
// test run (the fuzz target only runs its seeds without -fuzz).
func TestModelRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		ops := make([]byte, 1+2*(5+r.IntN(80)))
		for j := range ops {
			ops[j] = byte(r.UintN(256))
		}
		// Publishing is more interesting than watching: bias op codes.
		for j := 1; j < len(ops); j += 2 {
			if r.IntN(3) == 0 {
				ops[j] = byte(1 + r.IntN(3))
			}
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { runModel(t, ops) })
	}
}
