package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fanout-go/fanout"
)

// The model test drives a broadcaster from one goroutine with a sequence of
// operations decoded from bytes, and checks every observable result against a
// plain reference model: what each watcher holds, what each read returns,
// ActionOrDrop's verdicts, the drop counters, and how watchers close. It runs
// as a fuzz target (go test -fuzz FuzzModel) and, in every test run, over its
// seeds and a batch of random sequences.

type modelWatcher struct {
	w        *fanout.Watcher[int]
	q        int
	beh      int // index into modelBehaviors
	useChan  bool
	queue    []int
	closed   error
	dropFull uint64
	dropOld  uint64
	dropEvic uint64
}

var modelBehaviors = []fanout.FullChannelBehavior{
	fanout.WaitIfChannelFull,
	fanout.DropIfChannelFull,
	fanout.DropOldestIfChannelFull,
	fanout.EvictIfChannelFull,
	verdictBehavior(fanout.VerdictWait), // user-defined: never on a fast path
	verdictBehavior(fanout.VerdictDropNew),
	verdictBehavior(fanout.VerdictDropOldest),
	verdictBehavior(fanout.VerdictEvict),
}

// verdictBehavior is a user-defined behaviour that always returns one
// verdict; the model treats it like the built-in with that verdict.
type verdictBehavior fanout.Verdict

func (v verdictBehavior) OnFull(fanout.FullState) fanout.Decision {
	return fanout.Decision{Verdict: fanout.Verdict(v)}
}

// kind maps a behaviour index to the built-in it behaves like.
func kind(beh int) int { return beh % 4 }

type model struct {
	t        *testing.T
	b        *fanout.Broadcaster[int]
	ws       []*modelWatcher
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

// wouldWait reports whether publishing now would make the publisher wait.
func (m *model) wouldWait() bool {
	for _, mw := range m.ws {
		if mw.closed == nil && kind(mw.beh) == 0 && len(mw.queue) >= mw.q {
			return true
		}
	}
	return false
}

func (m *model) deliver(v int) {
	m.accepted++
	for _, mw := range m.ws {
		if mw.closed != nil {
			continue
		}
		if len(mw.queue) < mw.q {
			mw.queue = append(mw.queue, v)
			continue
		}
		switch kind(mw.beh) {
		case 1:
			mw.dropFull++
		case 2:
			mw.queue = append(mw.queue[1:], v)
			mw.dropOld++
		case 3:
			mw.dropEvic++
			mw.closed = fanout.ErrEvicted
		}
	}
}

func (m *model) step(op, arg byte) {
	m.t.Helper()
	switch op % 8 {
	case 0, 7: // Watch, WatchWithPrefix
		if len(m.ws) >= 6 {
			return
		}
		mw := &modelWatcher{q: 1 + int(arg%4), beh: int(arg/4) % len(modelBehaviors), useChan: arg&0x80 != 0}
		var prefix []int
		if op%8 == 7 {
			for i := range 1 + int(arg>>5)%3 {
				prefix = append(prefix, -1-i)
			}
			mw.queue = slices.Clone(prefix)
			mw.q = max(mw.q, len(prefix)+1) // as in k8s
		}
		m.log = append(m.log, fmt.Sprintf("watch q=%d beh=%v chan=%v prefix=%v", mw.q, modelBehaviors[mw.beh], mw.useChan, prefix))
		opts := []fanout.Option{fanout.WithQueueLength(1 + int(arg%4)), fanout.WithFullChannelBehavior(modelBehaviors[mw.beh])}
		var w *fanout.Watcher[int]
		var err error
		if prefix != nil {
			w, err = m.b.WatchWithPrefix(prefix, opts...)
		} else {
			w, err = m.b.Watch(opts...)
		}
		if m.stopped {
			if !errors.Is(err, fanout.ErrStopped) {
				m.fail("Watch after Shutdown: %v", err)
			}
			return
		}
		if err != nil {
			m.fail("Watch: %v", err)
		}
		mw.w = w
		if mw.useChan {
			w.ResultChan()
		}
		m.ws = append(m.ws, mw)
	case 1, 2: // ActionOrDrop, or Action when it would not wait
		v := m.next
		m.next++
		if op%8 == 2 && !m.wouldWait() {
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
		case m.wouldWait():
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
	case 3: // read up to k values without waiting
		if len(m.ws) == 0 {
			return
		}
		mw := m.ws[int(arg)%len(m.ws)]
		k := 1 + int(arg/16)%4
		got := m.read(mw, k)
		want := mw.queue[:min(k, len(mw.queue))]
		m.log = append(m.log, fmt.Sprintf("read w%d k=%d -> %v", mw.w.ID(), k, got))
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			m.fail("watcher %d read %v, want %v", mw.w.ID(), got, want)
		}
		mw.queue = mw.queue[len(want):]
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

func (m *model) checkStats() {
	m.t.Helper()
	for _, mw := range m.ws {
		s := mw.w.Stats()
		if s.Queued != len(mw.queue) || s.DroppedFull != mw.dropFull || s.DroppedOldest != mw.dropOld || s.DroppedEvicted != mw.dropEvic {
			m.fail("watcher %d stats %+v, model queue %v drops full=%d oldest=%d evicted=%d",
				mw.w.ID(), s, mw.queue, mw.dropFull, mw.dropOld, mw.dropEvic)
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

func runModel(t *testing.T, ops []byte) {
	m := &model{t: t, b: fanout.New[int]()}
	for i := 0; i+1 < len(ops); i += 2 {
		m.step(ops[i], ops[i+1])
	}
	m.finish()
}

func FuzzModel(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 1, 0, 3, 0})
	f.Add([]byte{0, 4, 0, 8, 0, 12, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 3, 0x31, 4, 1, 1, 0, 3, 0x32})
	f.Add([]byte{0, 0x81, 0, 0x05, 2, 0, 2, 0, 2, 0, 6, 0, 1, 0, 3, 0x10, 5, 0, 1, 0})
	f.Add([]byte{0, 3, 1, 0, 1, 0, 1, 0, 1, 0, 6, 0, 3, 0x30, 1, 0, 4, 0, 3, 0x30})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 400 {
			ops = ops[:400]
		}
		runModel(t, ops)
	})
}

// TestModelRandom runs the model over random operation sequences in every
// test run (the fuzz target only runs its seeds without -fuzz).
func TestModelRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		ops := make([]byte, 2*(5+r.IntN(60)))
		for j := range ops {
			ops[j] = byte(r.UintN(256))
		}
		// Publishing is more interesting than watching: bias op codes.
		for j := 0; j < len(ops); j += 2 {
			if r.IntN(3) == 0 {
				ops[j] = byte(1 + r.IntN(3))
			}
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { runModel(t, ops) })
	}
}
