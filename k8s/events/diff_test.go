package events

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"
)

// The differential tests play one script against client-go's broadcaster
// and ours, each in a synctest bubble of its own (so both see the same
// fake times), letting everything settle after each step, and compare the
// calls their sinks received: verbs, names, times, series counts and
// observed times, resource versions and patch bytes.

type step struct {
	at      time.Duration
	obj     string // the regarding pod's name, in namespace ns
	related string // "" for none
	reason  string
	note    string
}

type scenario struct {
	name  string
	steps []step
	end   time.Duration
	fail  func(n int, o op) error
	// noTimes compares without the call times, for scripts with retries:
	// both jitter their pauses at random.
	noTimes bool
}

// repeats returns one step of the same event (pod a, reason R) at each of
// the times.
func repeats(at ...time.Duration) []step {
	steps := make([]step, len(at))
	for i, t := range at {
		steps[i] = step{at: t, obj: "a", reason: "R"}
	}
	return steps
}

// failCalls returns a scenario's fail function that fails the sink calls
// numbered calls (from 0, in the order made) with err, and no other.
func failCalls(err error, calls ...int) func(int, op) error {
	return func(n int, _ op) error {
		if slices.Contains(calls, n) {
			return err
		}
		return nil
	}
}

func play(r EventRecorder, sc scenario) {
	for _, s := range sc.steps {
		sleepUntil(s.at)
		var related runtime.Object
		if s.related != "" {
			related = pod(s.related, "ns")
		}
		r.Eventf(pod(s.obj, "ns"), related, corev1.EventTypeNormal, s.reason, "Act", s.note)
		synctest.Wait()
	}
	sleepUntil(sc.end)
	synctest.Wait()
}

func runClientGo(t *testing.T, sc scenario) []op {
	var ops []op
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		sink.fail = sc.fail
		eb := clientevents.NewBroadcaster(sink)
		ctx, cancel := context.WithCancel(quietCtx(context.Background()))
		require.NoError(t, eb.StartRecordingToSinkWithContext(ctx))
		synctest.Wait() // its first passes, on an empty cache
		play(eb.NewRecorder(scheme.Scheme, "ctrl").WithLogger(quiet), sc)
		ops = sink.ops()
		cancel()
		eb.Shutdown()
		synctest.Wait()
	})
	return ops
}

func runOurs(t *testing.T, sc scenario) []op {
	var ops []op
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		sink.fail = sc.fail
		eb := NewBroadcaster(sink)
		ctx, cancel := context.WithCancel(quietCtx(context.Background()))
		require.NoError(t, eb.StartRecordingToSinkWithContext(ctx))
		play(eb.NewRecorder(scheme.Scheme, "ctrl").WithLogger(quiet), sc)
		ops = sink.ops()
		cancel()
		eb.Shutdown()
	})
	return ops
}

func TestDifferentialWithClientGo(t *testing.T) {
	sec, min := time.Second, time.Minute
	every := func(obj string, from, to, period time.Duration) []step {
		var s []step
		for at := from; at <= to; at += period {
			s = append(s, step{at: at, obj: obj, reason: "Tick", note: "tick"})
		}
		return s
	}
	scenarios := []scenario{
		{
			name: "series lifecycle",
			steps: []step{
				{at: 0, obj: "a", reason: "R", note: "one"},
				{at: 1 * sec, obj: "a", reason: "R", note: "two"},
				{at: 2 * sec, obj: "a", reason: "R", note: "three"},
				{at: 3 * sec, obj: "b", reason: "R", note: "other object"},
				{at: 4 * sec, obj: "a", reason: "R", note: "other note, same series"},
				{at: 5 * sec, obj: "a", related: "b", reason: "R", note: "with related"},
				{at: 6 * sec, obj: "a", related: "b", reason: "R", note: "with related"},
				{at: 7 * sec, obj: "a", reason: "Other", note: "other reason"},
				{at: 5*min + 7*sec, obj: "b", reason: "R", note: "b again"},
				{at: 13*min + 7*sec, obj: "a", reason: "R", note: "after finish"},
				{at: 13*min + 8*sec, obj: "a", reason: "R", note: "new series"},
			},
			end: 29 * min,
		},
		{
			name:  "refresh keeps open series alive",
			steps: append([]step{{at: 0, obj: "a", reason: "Tick"}}, every("a", 10*sec, 40*min+10*sec, 5*min)...),
			end:   65 * min,
		},
		{
			name: "many keys interleaved",
			steps: func() []step {
				var s []step
				for i := range 30 {
					s = append(s, step{at: time.Duration(i) * 7 * sec, obj: string(rune('a' + i%3)), reason: []string{"X", "Y"}[i%2], note: "n"})
				}
				return s
			}(),
			end: 25 * min,
		},
		{
			name:  "patch 404 creates",
			steps: repeats(0, sec, 2*sec),
			end:   20 * min,
			fail: func(n int, o op) error {
				if o.Verb == "patch" {
					return notFound(o.Name)
				}
				return nil
			},
		},
		{
			name: "rejected writes are dropped",
			steps: []step{
				{at: 0, obj: "a", reason: "R"},
				{at: sec, obj: "bad", reason: "R"},
				{at: 2 * sec, obj: "bad", reason: "R"},
				{at: 3 * sec, obj: "a", reason: "R"},
			},
			end: 20 * min,
			fail: func(n int, o op) error {
				if strings.HasPrefix(o.Name, "bad.") {
					return badRequest()
				}
				return nil
			},
		},
		{
			name:    "series already exists is retried",
			steps:   repeats(0, sec),
			end:     20 * min,
			noTimes: true,
			fail: func(n int, o op) error {
				switch n {
				case 1:
					return notFound(o.Name)
				case 2:
					return alreadyExists(o.Name)
				}
				return nil
			},
		},
		{
			name: "transport errors are retried until the limit",
			steps: []step{
				{at: 0, obj: "a", reason: "R"},
				{at: 5 * min, obj: "b", reason: "R"},
			},
			end:     10 * min,
			noTimes: true,
			fail: func(n int, o op) error {
				if strings.HasPrefix(o.Name, "a.") || n > 14 {
					return errTransport
				}
				return nil
			},
		},
	}
	compareWithClientGo(t, scenarios)
}

// compareWithClientGo runs each scenario through client-go's broadcaster and
// ours and fails t unless both make the same sink calls at the same times.
func compareWithClientGo(t *testing.T, scenarios []scenario) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			theirs := runClientGo(t, sc)
			ours := runOurs(t, sc)
			if sc.noTimes {
				for _, ops := range [][]op{theirs, ours} {
					for i := range ops {
						ops[i].At = 0
					}
				}
			}
			// client-go's passes walk a map: the calls of one instant come
			// in random order. Those of one event keep theirs.
			for _, ops := range [][]op{theirs, ours} {
				slices.SortStableFunc(ops, func(a, b op) int {
					return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Name, b.Name))
				})
			}
			require.NotEmpty(t, theirs)
			if !assert.Equal(t, theirs, ours) {
				for i, o := range theirs {
					t.Logf("client-go %d: %v", i, o)
				}
				for i, o := range ours {
					t.Logf("ours      %d: %v", i, o)
				}
			}
		})
	}
}
