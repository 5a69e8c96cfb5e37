package fanout_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// This file checks recorded histories against the model of
// history_model_test.go with porcupine and explains a history that fails;
// its tests show that the checker rejects histories that break the
// documented semantics.

// porcupine returns the model in porcupine's terms: nondeterministic, since
// a full channel watcher may take the value in hand instead of its verdict
// (see reprieves), made deterministic by porcupine's power-set
// construction.
func (m *historyModel) porcupine() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{m.init()} },
		Step: func(state, input, output any) []any {
			var next []any
			for _, s := range m.steps(state.(*hState), input.(hInput), output.(hOutput)) {
				next = append(next, s)
			}
			return next
		},
		Equal:             func(a, b any) bool { return a.(*hState).equal(b.(*hState)) },
		Hash:              func(s any) uint64 { return s.(*hState).hash() },
		DescribeOperation: m.describe,
		DescribeState:     func(s any) string { return s.(*hState).String() },
	}
	return nm.ToModel()
}

// steps returns the states the operation may lead to from s: none if the
// specification does not allow it, else the state step makes and, for an
// accepted value that evicted full channel watchers, the states in which
// some of them took it instead (reprieves).
func (m *historyModel) steps(s *hState, in hInput, out hOutput) []*hState {
	c := s.clone()
	if m.step(c, in, out) != "" {
		return nil
	}
	next := []*hState{c}
	evicted := c.reprievable
	c.reprievable = nil
	for subset := 1; subset < 1<<len(evicted); subset++ {
		alt := c.clone()
		for k, i := range evicted {
			if subset&(1<<k) != 0 {
				alt.ws[i].reprieve(in.T)
			}
		}
		next = append(next, alt)
	}
	return next
}

// checkTimeout bounds porcupine's search for one history; a search that
// runs out is logged, not failed. A failing history is searched twice
// (the verdict, then the visualization), and both must end well within the
// 10 s a fuzz worker gives one input: past that the worker panics
// ("deadlocked!", internal/fuzz) and the coordinator reports "fuzzing
// process hung or terminated unexpectedly: exit status 2", with no
// history. Under -race, a few histories in a thousand took porcupine
// 1.4 to over 10 s.
const checkTimeout = 3 * time.Second

// checkHistory checks that ops are linearizable with respect to m. If not,
// it fails t with the history and writes porcupine's visualization to a
// temporary file.
func checkHistory(t testing.TB, m *historyModel, ops []porcupine.Operation) {
	t.Helper()
	pm := m.porcupine()
	switch porcupine.CheckOperationsTimeout(pm, ops, checkTimeout) {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		t.Logf("history of %d operations: no verdict within %v\n%s", len(ops), checkTimeout, describeHistory(m, ops))
		return
	}
	_, info := porcupine.CheckOperationsVerbose(pm, ops, checkTimeout)
	where := "(not written)"
	if f, err := os.CreateTemp("", "fanout-history-*.html"); err == nil {
		if err := porcupine.Visualize(pm, info, f); err == nil {
			where = f.Name()
		}
		f.Close()
	}
	t.Errorf("history of %d operations is not linearizable; visualization: %s\n%s%s",
		len(ops), where, describeHistory(m, ops), explain(m, ops, info))
}

// explain replays the longest linearization porcupine found and says why
// the model rejects each operation that could come next.
func explain(m *historyModel, ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var longest []int // indices into ops: the model has no partitions
	for _, part := range info.PartialLinearizations() {
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	states := []*hState{m.init()}
	done := make([]bool, len(ops))
	for _, i := range longest {
		var next []*hState
		for _, st := range states {
			next = append(next, m.steps(st, ops[i].Input.(hInput), ops[i].Output.(hOutput))...)
		}
		if len(next) > 0 {
			states = next
		}
		done[i] = true
	}
	s := states[0]
	var b strings.Builder
	fmt.Fprintf(&b, "longest linearization: %d operations, ending in state\n  %v\nnext candidates:\n", len(longest), s)
	first := int64(1 << 62) // the first return of an operation not linearized
	for i, op := range ops {
		if !done[i] {
			first = min(first, op.Return)
		}
	}
	for i, op := range ops {
		if !done[i] && op.Call <= first {
			why := m.step(s.clone(), op.Input.(hInput), op.Output.(hOutput))
			fmt.Fprintf(&b, "  %s: %s\n", m.describe(op.Input, op.Output), why)
		}
	}
	return b.String()
}

// describeHistory lists ops by call time.
func describeHistory(m *historyModel, ops []porcupine.Operation) string {
	ops = slices.Clone(ops)
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	var b strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&b, "  [%4d,%4d] c%d %s\n", op.Call, op.Return, op.ClientId, m.describe(op.Input, op.Output))
	}
	return b.String()
}

// String describes the state for a failure and the visualization.
func (s *hState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "order [")
	for i, e := range s.entries {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, describeValue(e&valueMask))
		if e&phantomBit != 0 {
			b.WriteString("(failed)")
		}
	}
	b.WriteString("]")
	if s.pending != 0 {
		fmt.Fprintf(&b, " pending %s", describeValue(s.pending))
	}
	if s.shutdown {
		b.WriteString(" shut down")
	}
	for i, w := range s.ws {
		if !w.on {
			continue
		}
		fmt.Fprintf(&b, "; w%d from %d read to %d", i, w.start, w.cursor)
		if w.end >= 0 {
			fmt.Fprintf(&b, " closed at %d (%v)", w.end, w.closedBy)
		}
	}
	return b.String()
}

// describeValue names a value by its publisher and number.
func describeValue(v uint64) string { return fmt.Sprintf("p%d.%d", v>>16-1, v&0xffff) }

// describe describes an operation for a failure and the visualization.
func (m *historyModel) describe(input, output any) string {
	in, out := input.(hInput), output.(hOutput)
	switch in.Op {
	case opPublish:
		vi := m.vals[in.V]
		s := fmt.Sprintf("publish(%s, %v) -> %v", describeValue(in.V), vi.mode, out.Err)
		if out.Seq >= 0 {
			s += fmt.Sprintf(" seq %d", out.Seq)
		}
		return s
	case opWatch:
		wi := m.watchers[in.W]
		return fmt.Sprintf("w%d = watch(%v, q=%d, replay=%d) -> %v", in.W, wi.kind, wi.q, wi.replay, out.Err)
	case opResultChan:
		return fmt.Sprintf("w%d.ResultChan()", in.W)
	case opRead:
		vs := make([]string, len(out.Vals))
		for i, v := range out.Vals {
			vs[i] = describeValue(v)
		}
		return fmt.Sprintf("w%d.read() -> %v %v", in.W, vs, out.Err)
	case opStop:
		return fmt.Sprintf("w%d.Stop()", in.W)
	case opShutdown:
		return "Shutdown()"
	case opShutdownDone:
		return "(Shutdown returned)"
	case opWStats:
		return fmt.Sprintf("w%d.Stats() -> delivered %d dropped %d evicted %d queued %d",
			in.W, out.Delivered, out.Dropped, out.Evicted, out.Queued)
	case opStats:
		return fmt.Sprintf("Stats() -> accepted %d refused %d watchers %d", out.N, out.Refused, out.Watchers)
	case opTaken:
		return fmt.Sprintf("Taken() -> %d", out.N)
	}
	return "?"
}

// histBuilder builds a history by hand, for the tests of the checker.
type histBuilder struct {
	model historyModel
	ops   []porcupine.Operation
	next  [4]uint64 // values made, per publisher
}

func newHistBuilder() *histBuilder {
	return &histBuilder{model: historyModel{vals: map[uint64]valInfo{}}}
}

func (b *histBuilder) watcher(kind wKind, q int) int {
	b.model.watchers = append(b.model.watchers, watchInfo{kind: kind, q: q})
	return len(b.model.watchers) - 1
}

// value makes the next value of publisher p; prev is the previous value of
// its batch, or 0.
func (b *histBuilder) value(p int, mode pubMode, prev uint64) uint64 {
	b.next[p]++
	v := uint64(p+1)<<16 | b.next[p]
	b.model.vals[v] = valInfo{mode: mode, prev: prev}
	return v
}

func (b *histBuilder) op(call, ret int64, in hInput, out hOutput) {
	b.ops = append(b.ops, porcupine.Operation{Input: in, Output: out, Call: call, Return: ret})
}

func (b *histBuilder) publish(call, ret int64, v uint64, err errCode) {
	b.returned(v, ret)
	b.op(call, ret, hInput{Op: opPublish, V: v, T: ret}, hOutput{Err: err, Seq: -1, Offered: err != errNone})
}

func (b *histBuilder) publishSeq(call, ret int64, v uint64, seq int64) {
	b.returned(v, ret)
	b.op(call, ret, hInput{Op: opPublish, V: v, T: ret}, hOutput{Seq: seq})
}

// returned records when v's publish returned, as histRun.record does.
func (b *histBuilder) returned(v uint64, ret int64) {
	vi := b.model.vals[v]
	vi.ret = ret
	b.model.vals[v] = vi
}

func (b *histBuilder) watch(call, ret int64, w int) {
	b.op(call, ret, hInput{Op: opWatch, W: w}, hOutput{})
}

// watchedValue registers a watcher of kind and queue length q at [1,2],
// then publishes a value with Action at [3,4].
func (b *histBuilder) watchedValue(kind wKind, q int) (int, uint64) {
	w, v := b.watcher(kind, q), b.value(0, modeAction, 0)
	b.watch(1, 2, w)
	b.publish(3, 4, v, errNone)
	return w, v
}

// read records a read of vals, or with none a read that timed out.
func (b *histBuilder) read(call, ret int64, w int, vals ...uint64) {
	out := hOutput{Vals: vals}
	if len(vals) == 0 {
		out.Err = errCtx
	}
	b.op(call, ret, hInput{Op: opRead, W: w, T: call}, out)
}

func (b *histBuilder) readErr(call, ret int64, w int, err errCode) {
	b.op(call, ret, hInput{Op: opRead, W: w, T: call}, hOutput{Err: err})
}

func (b *histBuilder) shutdown(call, ret int64) {
	b.op(call, ret, hInput{Op: opShutdown}, hOutput{})
	b.op(ret, ret, hInput{Op: opShutdownDone}, hOutput{})
}

// either returns a for the legal twin of a case, else b.
func either[T any](legal bool, a, b T) T {
	if legal {
		return a
	}
	return b
}

// TestHistoryCheckerRejectsViolations feeds the checker histories that
// break the documented semantics, each beside a twin that differs only in
// what makes it legal (the argument given with either), so that a model
// that accepted everything, or rejected these for another reason, would
// fail.
func TestHistoryCheckerRejectsViolations(t *testing.T) {
	tests := []struct {
		name string
		// build makes the violation, or with legal its legal twin.
		build func(b *histBuilder, legal bool)
	}{{
		name: "a watcher receives a value accepted before it registered",
		build: func(b *histBuilder, legal bool) {
			w, v := b.watcher(wkWait, 4), b.value(0, modeAction, 0)
			b.publish(1, 2, v, errNone)
			b.watch(either[int64](legal, 1, 3), 4, w) // concurrent, it may register first
			b.read(5, 6, w, v)
		},
	}, {
		name: "a lossless watcher skips a value",
		build: func(b *histBuilder, legal bool) {
			w := b.watcher(either(legal, wkDropNew, wkWait), 4)
			v1, v2 := b.value(0, modeAction, 0), b.value(0, modeAction, 0)
			b.watch(1, 2, w)
			b.publish(3, 4, v1, errNone)
			b.publish(5, 6, v2, errNone)
			b.read(7, 8, w, v2)
		},
	}, {
		name: "two watchers receive two values in opposite orders",
		build: func(b *histBuilder, legal bool) {
			w1, w2 := b.watcher(wkWait, 4), b.watcher(wkWait, 4)
			v1, v2 := b.value(0, modeAction, 0), b.value(1, modeAction, 0)
			b.watch(1, 2, w1)
			b.watch(1, 2, w2)
			b.publish(3, 10, v1, errNone)
			b.publish(3, 10, v2, errNone)
			b.read(11, 12, w1, v2, v1)
			b.read(11, 12, w2, either(legal, []uint64{v2, v1}, []uint64{v1, v2})...)
		},
	}, {
		name: "a value is read twice",
		build: func(b *histBuilder, legal bool) {
			w, v := b.watchedValue(wkDropOldest, 4)
			b.read(5, 6, w, v)
			b.read(7, 8, w, either(legal, []uint64{}, []uint64{v})...) // nothing: it timed out
		},
	}, {
		name: "a value is accepted after Shutdown returned",
		build: func(b *histBuilder, legal bool) {
			b.shutdown(1, 2)
			b.publish(either[int64](legal, 1, 3), 4, b.value(0, modeAction, 0), errNone) // concurrent, it may come first
		},
	}, {
		name: "a publish returns ErrStopped before Shutdown was called",
		build: func(b *histBuilder, legal bool) {
			b.publish(1, either[int64](legal, 4, 2), b.value(0, modeAction, 0), errStopped)
			b.shutdown(3, 4)
		},
	}, {
		name: "Watch succeeds after Shutdown",
		build: func(b *histBuilder, legal bool) {
			b.shutdown(1, 2)
			b.op(3, 4, hInput{Op: opWatch, W: b.watcher(wkWait, 1)}, hOutput{Err: either(legal, errStopped, errNone)})
		},
	}, {
		name: "ActionSeq's sequence numbers are not the order",
		build: func(b *histBuilder, legal bool) {
			b.publishSeq(1, 2, b.value(0, modeStrict, 0), 0)
			b.publishSeq(3, 4, b.value(0, modeStrict, 0), either[int64](legal, 1, 0))
		},
	}, {
		name: "another publisher's value lands inside a batch",
		build: func(b *histBuilder, legal bool) {
			w := b.watcher(wkWait, 4)
			a := b.value(0, modeAction, 0)
			a2 := b.value(0, modeAction, a)
			c := b.value(1, modeAction, 0)
			b.watch(1, 2, w)
			b.publish(3, 10, a, errNone)
			b.publish(3, 10, a2, errNone)
			b.publish(3, 10, c, errNone)
			b.read(11, 12, w, either(legal, []uint64{c, a, a2}, []uint64{a, c, a2})...)
		},
	}, {
		name: "a value is accepted while a lossless watcher is full",
		build: func(b *histBuilder, legal bool) {
			w := b.watcher(wkWait, either(legal, 2, 1))
			v1, v2 := b.value(0, modeAction, 0), b.value(0, modeAction, 0)
			b.watch(1, 2, w)
			b.publish(3, 4, v1, errNone)
			b.publish(5, 6, v2, errNone)
			b.read(7, 8, w, v1, v2)
		},
	}, {
		name: "a full EvictIfChannelFull watcher is not evicted",
		build: func(b *histBuilder, legal bool) {
			w, v1, v2 := b.watcher(wkEvict, 1), b.value(0, modeAction, 0), b.value(0, modeAction, 0)
			b.watch(1, 2, w)
			b.publish(3, 4, v1, errNone)
			b.publish(5, 6, v2, errNone)
			b.read(7, 8, w, v1)
			b.op(9, 10, hInput{Op: opRead, W: w, T: 9}, either(legal, hOutput{Err: errEvicted}, hOutput{Vals: []uint64{v2}}))
		},
	}, {
		name: "a full channel watcher takes the value only if its consumer made room before the publish returned",
		build: func(b *histBuilder, legal bool) {
			// v2 is accepted while w, on a channel, holds v1: a pull
			// watcher reads v2 before w's consumer takes v1. The
			// publisher gives w its verdict after pull readers can read
			// v2, and w takes v2 if its consumer made room by then, with
			// a read that began before the publish returned.
			// (A strict publish hands w nothing before it accepts v2.)
			w, p := b.watcher(wkEvict, 1), b.watcher(wkWait, 4)
			v1, v2 := b.value(0, modeAction, 0), b.value(0, modeStrict, 0)
			b.watch(1, 2, w)
			b.watch(1, 2, p)
			b.op(2, 2, hInput{Op: opResultChan, W: w}, hOutput{})
			b.publish(3, 4, v1, errNone)
			b.publish(5, 12, v2, errNone)
			b.read(6, 7, p, v1, v2)
			at := either[int64](legal, 8, 13)
			b.read(at, at+1, w, v1)
			b.read(at+2, at+3, w, v2)
		},
	}, {
		name: "a full channel watcher takes the value only if its consumer made room before the next value",
		build: func(b *histBuilder, legal bool) {
			// As above, but v3 is accepted (the pull watcher reads it)
			// before w's consumer takes v1: v2's verdict was given before
			// v3 was accepted, when w was still full.
			w, p := b.watcher(wkEvict, 1), b.watcher(wkWait, 4)
			v1, v2, v3 := b.value(0, modeAction, 0), b.value(0, modeStrict, 0), b.value(1, modeStrict, 0)
			b.watch(1, 2, w)
			b.watch(1, 2, p)
			b.op(2, 2, hInput{Op: opResultChan, W: w}, hOutput{})
			b.publish(3, 4, v1, errNone)
			b.publish(5, 15, v2, errNone)
			b.publish(5, 15, v3, errNone)
			b.read(6, 7, p, v1, v2)
			at := either[int64](legal, 16, 7)
			b.read(at, at+1, p, v3)
			b.read(9, 10, w, v1)
			b.read(11, 12, w, v2)
		},
	}, {
		name: "an evicted watcher looks open once the publish that evicted it returned",
		build: func(b *histBuilder, legal bool) {
			// v2 evicts w, which holds v1. Its consumer takes v1 and may
			// find the channel open before the publisher has closed it,
			// but not once the publish has returned.
			w, v1, v2 := b.watcher(wkEvict, 1), b.value(0, modeAction, 0), b.value(0, modeAction, 0)
			b.watch(1, 2, w)
			b.op(2, 2, hInput{Op: opResultChan, W: w}, hOutput{})
			b.publish(3, 4, v1, errNone)
			b.publish(5, 10, v2, errNone)
			b.read(6, 7, w, v1)
			at := either[int64](legal, 8, 11)
			b.read(at, at+1, w) // nothing: it timed out
			b.readErr(14, 15, w, errEvicted)
		},
	}, {
		name: "a channel watcher lacks a value a pull watcher read once its publish returned",
		build: func(b *histBuilder, legal bool) {
			// The publisher sends into the channels just after pull
			// readers can read the value, within its call: until the call
			// returns, the channel may still be empty.
			pull, ch := b.watcher(wkWait, 2), b.watcher(wkWait, 2)
			v := b.value(0, modeAction, 0)
			b.watch(1, 2, pull)
			b.watch(1, 2, ch)
			b.op(2, 2, hInput{Op: opResultChan, W: ch}, hOutput{})
			b.publish(3, 10, v, errNone)
			b.read(4, 5, pull, v)
			at := either[int64](legal, 6, 11)
			b.read(at, at+1, ch) // nothing: it timed out
			b.read(14, 15, ch, v)
		},
	}, {
		name: "an evicted pull watcher looks open while it is evicted",
		build: func(b *histBuilder, legal bool) {
			// The shape of the channel case above, read with the pull
			// methods: the publisher closes it in the same hold of its
			// lock that found it full, so its reader sees no gap.
			w, v1, v2 := b.watcher(wkEvict, 1), b.value(0, modeAction, 0), b.value(0, modeAction, 0)
			b.watch(1, 2, w)
			b.op(2, 2, hInput{Op: either(legal, opResultChan, opTaken)}, hOutput{})
			b.publish(3, 4, v1, errNone)
			b.publish(5, 10, v2, errNone)
			b.read(6, 7, w, v1)
			b.read(8, 9, w) // nothing: it timed out
			b.readErr(14, 15, w, errEvicted)
			b.op(16, 17, hInput{Op: opWStats, W: w}, hOutput{Delivered: 1, Dropped: 1, Evicted: 1})
		},
	}, {
		name: "a watcher read with the pull methods gets the value of a failed publish",
		build: func(b *histBuilder, legal bool) {
			w, v := b.watcher(wkWait, 4), b.value(0, modeStrict, 0)
			b.watch(1, 2, w)
			// A full channel watcher that waits may have been handed it.
			b.op(2, 2, hInput{Op: either(legal, opResultChan, opTaken)}, hOutput{})
			b.publish(3, 4, v, errCtx)
			b.read(5, 6, w, v)
		},
	}, {
		name: "ActionOrDrop's value is read before it was accepted",
		build: func(b *histBuilder, legal bool) {
			// Action hands a value to the channel watchers with room first.
			v := b.value(0, either(legal, modeAction, modeTry), 0)
			early, late := b.watcher(wkDropNew, 1), b.watcher(wkWait, 1)
			b.watch(1, 2, early)
			b.op(2, 2, hInput{Op: opResultChan, W: early}, hOutput{})
			b.publish(3, 10, v, errNone)
			b.read(4, 5, early, v)
			b.watch(6, 7, late) // registered before v was accepted
			b.read(11, 12, late, v)
		},
	}, {
		name: "a stopped watcher reads a value accepted after its Stop",
		build: func(b *histBuilder, legal bool) {
			// A channel watcher may keep the value a publisher handed it
			// before accepting it (documented under Watcher.Stop); a pull
			// watcher never receives it. v2 waits for x, full until after
			// w's Stop.
			w, x := b.watcher(wkWait, 1), b.watcher(wkWait, 1)
			v1, v2 := b.value(0, modeAction, 0), b.value(0, modeAction, 0)
			b.watch(1, 2, w)
			b.watch(1, 2, x)
			if legal {
				b.op(2, 2, hInput{Op: opResultChan, W: w}, hOutput{})
			}
			b.publish(3, 4, v1, errNone)
			b.publish(5, 12, v2, errNone)
			b.read(6, 7, w, v1)
			b.op(8, 9, hInput{Op: opStop, W: w}, hOutput{})
			b.read(10, 11, x, v1)
			b.read(13, 14, w, v2)
			b.readErr(15, 16, w, errWatcherStopped)
		},
	}, {
		name: "the close reason comes before the queued values",
		build: func(b *histBuilder, legal bool) {
			w, v := b.watchedValue(wkWait, 4)
			b.op(5, 6, hInput{Op: opStop, W: w}, hOutput{})
			if legal {
				b.read(7, 8, w, v)
			}
			b.readErr(9, 10, w, errWatcherStopped)
		},
	}, {
		name: "a read times out while a value is queued",
		build: func(b *histBuilder, legal bool) {
			w, _ := b.watchedValue(wkWait, 4)
			b.readErr(either[int64](legal, 3, 5), 6, w, errCtx) // concurrent, it may look first
		},
	}, {
		name: "Taken is ahead of a lossless watcher",
		build: func(b *histBuilder, legal bool) {
			w, v := b.watchedValue(wkWait, 4)
			if legal {
				b.read(5, 6, w, v)
			}
			b.op(7, 8, hInput{Op: opTaken}, hOutput{N: 1})
		},
	}, {
		name: "a lossy watcher's drops do not account for every value",
		build: func(b *histBuilder, legal bool) {
			w := b.watcher(wkDropNew, 1)
			b.watch(1, 2, w)
			vs := []uint64{b.value(0, modeAction, 0), b.value(0, modeAction, 0), b.value(0, modeAction, 0)}
			for i, v := range vs {
				b.publish(int64(3+2*i), int64(4+2*i), v, errNone)
			}
			b.read(9, 10, w, vs[0])
			b.op(11, 12, hInput{Op: opStop, W: w}, hOutput{})
			b.readErr(13, 14, w, errWatcherStopped)
			b.op(15, 16, hInput{Op: opWStats, W: w}, hOutput{Delivered: 1, Dropped: either[uint64](legal, 2, 1)})
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, legal := range []bool{false, true} {
				b := newHistBuilder()
				tt.build(b, legal)
				if got := porcupine.CheckOperations(b.model.porcupine(), b.ops); got != legal {
					t.Errorf("legal=%v: the checker says linearizable=%v\n%s", legal, got, describeHistory(&b.model, b.ops))
				}
			}
		})
	}
}
