package events

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"
)

// bubbleStart is the time a synctest bubble starts at.
var bubbleStart = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func micro(d time.Duration) string { return bubbleStart.Add(d).Format(metav1.RFC3339Micro) }

func nameAt(obj string, d time.Duration) string {
	return fmt.Sprintf("%s.%x", obj, bubbleStart.Add(d).UnixNano())
}

// sleepUntil sleeps until d after the bubble started.
func sleepUntil(d time.Duration) { time.Sleep(time.Until(bubbleStart.Add(d))) }

// clientGoPatch is client-go's createPatchBytesForSeries, restated: the
// strategic merge patch from ev without Series to ev.
func clientGoPatch(t *testing.T, ev *eventsv1.Event) string {
	t.Helper()
	old := ev.DeepCopy()
	old.Series = nil
	oldJSON, err := json.Marshal(old)
	require.NoError(t, err)
	newJSON, err := json.Marshal(ev)
	require.NoError(t, err)
	p, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, eventsv1.Event{})
	require.NoError(t, err)
	return string(p)
}

// summary is the part of an op the series tests check.
type summary struct {
	At    time.Duration
	Verb  string
	Name  string
	Count int32
	Obs   string
	RV    string
}

// summarize returns the sink's writes in the order a test can expect:
// by time, and at one instant by series name. The sink's writers write
// different series side by side, so two writes made at the same
// (synctest) instant land in either order; the writes of one series keep
// theirs (the sort is stable).
func summarize(ops []op) []summary {
	out := make([]summary, len(ops))
	for i, o := range ops {
		out[i] = summary{o.At, o.Verb, o.Name, o.Count, o.Observed, o.RV}
	}
	slices.SortStableFunc(out, func(a, b summary) int {
		return cmp.Or(cmp.Compare(a.At, b.At), strings.Compare(a.Name, b.Name))
	})
	return out
}

func TestSeriesCreateThenPatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, r := startQuiet(t, sink)
		p := pod("foo", "ns")
		r.Eventf(p, nil, corev1.EventTypeNormal, "Pulled", "Pull", "first")
		time.Sleep(time.Second)
		r.Eventf(p, nil, corev1.EventTypeNormal, "Pulled", "Pull", "the note is not in the key")
		flush(t, b)
		ops := sink.ops()
		require.Len(t, ops, 2)
		assert.Equal(t, op{Verb: "create", NS: "ns", Name: nameAt("foo", 0), Note: "first"}, ops[0])

		// The second occurrence patches the first event with Series.
		first := &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: nameAt("foo", 0), Namespace: "ns"},
			EventTime:           metav1.MicroTime{Time: bubbleStart},
			ReportingController: "ctrl",
			ReportingInstance:   ops[0].Name, // not part of the patch
			Action:              "Pull",
			Reason:              "Pulled",
			Regarding:           corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: "foo", Namespace: "ns", UID: "uid-foo"},
			Note:                "first",
			Type:                corev1.EventTypeNormal,
			Series:              &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.MicroTime{Time: bubbleStart.Add(time.Second)}},
		}
		want := `{"series":{"count":2,"lastObservedTime":"2000-01-01T00:00:01.000000Z"}}`
		require.Equal(t, want, clientGoPatch(t, first), "the restated algorithm")
		assert.Equal(t, op{At: time.Second, Verb: "patch", NS: "ns", Name: nameAt("foo", 0), Count: 2,
			Observed: micro(time.Second), Patch: want, Note: "first"}, ops[1])
		s := b.Stats()
		assert.EqualValues(t, 2, s.Written)
		assert.Zero(t, s.Merged)
	})
}

func TestSeriesKey(t *testing.T) {
	p, q := pod("p", "ns"), pod("q", "ns")
	cases := []struct {
		name     string
		second   func(r EventRecorder)
		wantVerb string
	}{
		{"same", func(r EventRecorder) { r.Eventf(p, q, corev1.EventTypeNormal, "R", "A", "n") }, "patch"},
		{"other note", func(r EventRecorder) { r.Eventf(p, q, corev1.EventTypeNormal, "R", "A", "other %d", 1) }, "patch"},
		{"other type", func(r EventRecorder) { r.Eventf(p, q, corev1.EventTypeWarning, "R", "A", "n") }, "create"},
		{"other reason", func(r EventRecorder) { r.Eventf(p, q, corev1.EventTypeNormal, "R2", "A", "n") }, "create"},
		{"other action", func(r EventRecorder) { r.Eventf(p, q, corev1.EventTypeNormal, "R", "A2", "n") }, "create"},
		{"other regarding", func(r EventRecorder) { r.Eventf(q, q, corev1.EventTypeNormal, "R", "A", "n") }, "create"},
		{"no related", func(r EventRecorder) { r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n") }, "create"},
		{"other related", func(r EventRecorder) { r.Eventf(p, p, corev1.EventTypeNormal, "R", "A", "n") }, "create"},
		{"other field path", func(r EventRecorder) {
			r.Eventf(&corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", Namespace: "ns", UID: "uid-p", FieldPath: "spec"}, q, corev1.EventTypeNormal, "R", "A", "n")
		}, "create"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := newRecordingSink()
				b, r := startQuiet(t, sink)
				r.Eventf(p, q, corev1.EventTypeNormal, "R", "A", "n")
				tc.second(r)
				flush(t, b)
				ops := sink.ops()
				require.Len(t, ops, 2)
				assert.Equal(t, tc.wantVerb, ops[1].Verb)
			})
		})
	}

	t.Run("other controller", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sink := newRecordingSink()
			b, r := startQuiet(t, sink)
			r2 := b.NewRecorder(testScheme(), "other").WithLogger(quiet)
			r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
			r2.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
			flush(t, b)
			ops := sink.ops()
			require.Len(t, ops, 2)
			assert.Equal(t, "create", ops[1].Verb)
		})
	})
}

// Occurrences after the second are merged into the cached series, written
// by the finish pass once the series has been idle for 6 minutes; then the
// key starts afresh.
func TestSeriesMergedUntilFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, r := startQuiet(t, sink)
		p := pod("foo", "ns")
		for i := range 5 {
			sleepUntil(time.Duration(i) * time.Second)
			r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n%d", i)
		}
		flush(t, b)
		assert.EqualValues(t, 3, b.Stats().Merged)
		assert.Len(t, sink.ops(), 2)

		// The pass at 6 min finds the series idle for less than 6 min.
		sleepUntil(6*time.Minute + 30*time.Second)
		assert.Len(t, sink.ops(), 2)

		// The pass at 12 min writes the final count and forgets the key.
		sleepUntil(12*time.Minute + 30*time.Second)
		r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "again")
		flush(t, b)
		assert.Equal(t, []summary{
			{0, "create", nameAt("foo", 0), 0, "", ""},
			{time.Second, "patch", nameAt("foo", 0), 2, micro(time.Second), ""},
			{12 * time.Minute, "patch", nameAt("foo", 0), 5, micro(4 * time.Second), ""},
			{12*time.Minute + 30*time.Second, "create", nameAt("foo", 12*time.Minute+30*time.Second), 0, "", ""},
		}, summarize(sink.ops()))
		s := b.Stats()
		assert.EqualValues(t, 3, s.Merged)
		assert.EqualValues(t, 3, s.Written)
		assert.Zero(t, s.Dropped())
	})
}

// Open series are re-written every 30 minutes; the stored event replaces
// the cached one (its resource version shows in the next write), and a
// finishing patch answered 404 becomes a create with the resource version
// cleared.
func TestSeriesRefreshAndFinish404(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		sink.fail = func(n int, o op) error {
			if o.Verb == "patch" && o.At == 42*time.Minute {
				return notFound(o.Name)
			}
			return nil
		}
		b, r := startQuiet(t, sink)
		p := pod("foo", "ns")
		r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
		sleepUntil(time.Second)
		r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
		// Off the passes' instants (multiples of 6 and 30 minutes).
		for m := 5; m <= 35; m += 5 {
			sleepUntil(time.Duration(m)*time.Minute + 10*time.Second)
			r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
		}
		sleepUntil(50 * time.Minute)
		flush(t, b)
		name := nameAt("foo", 0)
		assert.Equal(t, []summary{
			{0, "create", name, 0, "", ""},
			{time.Second, "patch", name, 2, micro(time.Second), ""},
			// refresh at 30 min: 0 s, 1 s, 5, 10, 15, 20, 25 min
			{30 * time.Minute, "patch", name, 7, micro(25*time.Minute + 10*time.Second), ""},
			// finish at 42 min: idle since 35 min; the cached event is the
			// one the refresh stored (resource version 3)
			{42 * time.Minute, "patch", name, 9, micro(35*time.Minute + 10*time.Second), "3"},
			{42 * time.Minute, "create", name, 9, micro(35*time.Minute + 10*time.Second), ""},
		}, summarize(sink.ops()))
		s := b.Stats()
		assert.EqualValues(t, 7, s.Merged)
		assert.EqualValues(t, 2, s.Written, "refresh and finish writes are not events")
		assert.Zero(t, s.Failures, "a 404 followed by a create is a success")
	})
}

func TestFinishForgetsSingletons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, r := startQuiet(t, sink)
		pb, pc := pod("b", "ns"), pod("c", "ns")
		r.Eventf(pb, nil, corev1.EventTypeNormal, "R", "A", "n")
		r.Eventf(pc, nil, corev1.EventTypeNormal, "R", "A", "n")
		sleepUntil(5 * time.Minute)
		r.Eventf(pb, nil, corev1.EventTypeNormal, "R", "A", "n")
		sleepUntil(12*time.Minute + time.Second)
		r.Eventf(pc, nil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b)
		assert.Equal(t, []summary{
			{0, "create", nameAt("b", 0), 0, "", ""},
			{0, "create", nameAt("c", 0), 0, "", ""},
			{5 * time.Minute, "patch", nameAt("b", 0), 2, micro(5 * time.Minute), ""},
			{12 * time.Minute, "patch", nameAt("b", 0), 2, micro(5 * time.Minute), ""},
			{12*time.Minute + time.Second, "create", nameAt("c", 12*time.Minute+time.Second), 0, "", ""},
		}, summarize(sink.ops()))
	})
}

// A maintenance write holds no lock: occurrences recorded while it hangs
// are merged at once, and the count they add survives the write.
func TestMaintenanceWritesWithoutLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		sink := newRecordingSink()
		sink.fail = func(n int, o op) error {
			if o.At == 30*time.Minute {
				<-gate
			}
			return nil
		}
		b, r := startQuiet(t, sink)
		p := pod("foo", "ns")
		r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
		r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
		for m := 5; m <= 25; m += 5 {
			sleepUntil(time.Duration(m)*time.Minute + 10*time.Second)
			r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
		}
		// The refresh at 30 min hangs in its patch.
		sleepUntil(30*time.Minute + time.Second)
		r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b) // would hang if the refresh held the cache's lock
		assert.EqualValues(t, 6, b.Stats().Merged)
		close(gate)
		sleepUntil(50 * time.Minute)
		ops := summarize(sink.ops())
		require.Len(t, ops, 4)
		assert.Equal(t, summary{30 * time.Minute, "patch", nameAt("foo", 0), 7, micro(25*time.Minute + 10*time.Second), ""}, ops[2])
		// finish at 42 min writes the count that includes the occurrence
		// recorded during the refresh.
		assert.Equal(t, summary{42 * time.Minute, "patch", nameAt("foo", 0), 8, micro(30*time.Minute + time.Second), "3"}, ops[3])
	})
}

// The cache is bounded: the least recently seen key goes first, and
// occurrences merged into an evicted series and not yet written are
// counted as dropped (full), not merged.
func TestSeriesCacheEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, r := startQuiet(t, sink, WithCacheSize(2))
		pa, pb, pc := pod("a", "ns"), pod("b", "ns"), pod("c", "ns")
		for _, p := range []*corev1.Pod{pa, pa, pa, pa, pb, pc} {
			r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
			time.Sleep(time.Second)
		}
		flush(t, b)
		s := b.Stats()
		assert.EqualValues(t, 1, b.SeriesEvicted())
		assert.EqualValues(t, 2, s.DroppedFull, "a's third and fourth occurrences")
		assert.Zero(t, s.Merged)
		// a starts afresh (evicting b, a singleton: not counted).
		r.Eventf(pa, nil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b)
		ops := sink.ops()
		require.Len(t, ops, 5)
		assert.Equal(t, "create", ops[4].Verb)
		assert.Equal(t, nameAt("a", 6*time.Second), ops[4].Name)
		assert.EqualValues(t, 1, b.SeriesEvicted())
		assert.EqualValues(t, 2, b.Stats().DroppedFull)
	})
}

// A series whose final write is rejected is forgotten, and its unwritten
// occurrences are counted as rejected.
func TestFinishRejectedCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		sink.fail = func(n int, o op) error {
			if o.At >= 6*time.Minute {
				return badRequest()
			}
			return nil
		}
		b, r := startQuiet(t, sink)
		p := pod("foo", "ns")
		for range 4 {
			r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
		}
		sleepUntil(13 * time.Minute)
		s := b.Stats()
		assert.Zero(t, s.Merged)
		assert.EqualValues(t, 2, s.DroppedRejected)
		assert.EqualValues(t, 1, s.Failures)
		ops := sink.ops()
		require.Len(t, ops, 3)
		// At 6 min the series is idle for exactly 6 min, not more.
		assert.Equal(t, 12*time.Minute, ops[2].At)
	})
}

// A failed refresh leaves the cached series as it was: the finish pass
// writes it later, without a stored resource version.
func TestRefreshFailureKeepsSeries(t *testing.T) {
	for _, failure := range []error{errTransport, badRequest()} {
		t.Run(failure.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := newRecordingSink()
				sink.fail = func(n int, o op) error {
					if o.At == 30*time.Minute {
						return failure
					}
					return nil
				}
				b, r := startQuiet(t, sink)
				p := pod("foo", "ns")
				r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
				for m := 5; m <= 25; m += 5 {
					sleepUntil(time.Duration(m)*time.Minute + 10*time.Second)
					r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
				}
				sleepUntil(40 * time.Minute)
				name := nameAt("foo", 0)
				assert.Equal(t, []summary{
					{0, "create", name, 0, "", ""},
					{5*time.Minute + 10*time.Second, "patch", name, 2, micro(5*time.Minute + 10*time.Second), ""},
					{30 * time.Minute, "patch", name, 6, micro(25*time.Minute + 10*time.Second), ""},
					{36 * time.Minute, "patch", name, 6, micro(25*time.Minute + 10*time.Second), ""},
				}, summarize(sink.ops()))
				s := b.Stats()
				assert.EqualValues(t, 1, s.Failures)
				assert.EqualValues(t, 4, s.Merged)
				assert.Zero(t, s.Dropped())
			})
		})
	}
}

// seriesWrites returns the count and observed time of every series
// write in ops.
func seriesWrites(ops []op) []string {
	var out []string
	for _, o := range ops {
		if o.Count > 0 {
			out = append(out, fmt.Sprintf("%s count=%d observed=%s", o.Verb, o.Count, o.Observed))
		}
	}
	return out
}

// threeOccurrencesThenFinish records three occurrences of one key at 0,
// 1 s and 2 s, then waits for the finish pass at 12 min.
func threeOccurrencesThenFinish(r EventRecorder) {
	p := pod("foo", "ns")
	for i := range 3 {
		sleepUntil(time.Duration(i) * time.Second)
		r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
	}
	sleepUntil(13 * time.Minute)
	synctest.Wait()
}

// The observed time of a series occurrence is when the event was
// recorded, not when the sink runner got round to it: client-go stamps it
// as the event is recorded, so with an API server that takes 5 s per call
// the patch of the 2nd occurrence still says 1 s and the finish write
// 2 s. The patch bytes are client-go's, and the observed time drives
// finish.
func TestSeriesObservedTimeIsWhenRecordedNotWhenWritten(t *testing.T) {
	var theirs, ours []string
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		sink.Delay = 5 * time.Second // a slow API server
		eb := clientevents.NewBroadcaster(sink)
		ctx, cancel := context.WithCancel(quietCtx(context.Background()))
		require.NoError(t, eb.StartRecordingToSinkWithContext(ctx))
		synctest.Wait()
		threeOccurrencesThenFinish(eb.NewRecorder(scheme.Scheme, "ctrl").WithLogger(quiet))
		theirs = seriesWrites(sink.ops())
		cancel()
		eb.Shutdown()
		synctest.Wait()
	})
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		sink.Delay = 5 * time.Second
		_, r := startQuiet(t, sink)
		threeOccurrencesThenFinish(r)
		ours = seriesWrites(sink.ops())
	})
	require.Equal(t, []string{
		"patch count=2 observed=" + micro(time.Second),
		"patch count=3 observed=" + micro(2*time.Second),
	}, theirs, "client-go, the reference")
	assert.Equal(t, theirs, ours)
}

// A series evicted while a refresh write of it is in flight: the refresh
// succeeds, so the occurrences merged into it reached the API server and
// stay counted as Merged, not as dropped (WithCacheSize: only occurrences
// "not yet written" are lost with an evicted series).
func TestSeriesEvictedDuringItsRefreshCountsMergedAsWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		sink := newRecordingSink()
		sink.Hold = func(c sinkCall) <-chan struct{} {
			if c.Op == "patch" && c.At.Sub(sink.start) == 30*time.Minute {
				return gate
			}
			return nil
		}
		b, r := startQuiet(t, sink, WithCacheSize(1))
		pa := pod("a", "ns")
		r.Eventf(pa, nil, corev1.EventTypeNormal, "R", "A", "n")
		for m := 5; m <= 25; m += 5 { // 2nd occurrence, then 4 merged
			sleepUntil(time.Duration(m)*time.Minute + 10*time.Second)
			r.Eventf(pa, nil, corev1.EventTypeNormal, "R", "A", "n")
		}
		sleepUntil(30*time.Minute + time.Second) // the refresh of a hangs
		r.Eventf(pod("b", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b) // b's create evicts a's series
		require.EqualValues(t, 1, b.SeriesEvicted())
		close(gate)
		synctest.Wait()
		ops := summarize(sink.ops())
		require.Len(t, ops, 4)
		assert.Equal(t, summary{30 * time.Minute, "patch", nameAt("a", 0), 6, micro(25*time.Minute + 10*time.Second), ""}, ops[2],
			"the refresh, held from 30 min until b's create evicted a, wrote the 4 merged occurrences")
		assert.Equal(t, "create", ops[3].Verb)
		s := b.Stats()
		assert.EqualValues(t, 3, s.Written)
		assert.EqualValues(t, 4, s.Merged, "the merged occurrences were written by the refresh")
		assert.Zero(t, s.DroppedFull, "nothing was lost")
	})
}

// seriesKeyFields is client-go's getKey, restated: what the series key
// must tell apart.
type seriesKeyFields struct {
	typ, action, reason, controller, instance string
	regarding, related                        corev1.ObjectReference
}

// seriesKey is ev's series key as a string.
func seriesKey(ev *eventsv1.Event) string { return string(appendSeriesKey(nil, ev)) }

func eventFor(k seriesKeyFields) *eventsv1.Event {
	ev := &eventsv1.Event{Type: k.typ, Action: k.action, Reason: k.reason, ReportingController: k.controller,
		ReportingInstance: k.instance, Regarding: k.regarding}
	if k.related != (corev1.ObjectReference{}) {
		ev.Related = k.related.DeepCopy()
	}
	return ev
}

// Two events have the same series key exactly when client-go's key
// fields are equal: field boundaries cannot be shifted to forge a match.
func FuzzSeriesKey(f *testing.F) {
	f.Add("Normal", "A", "R", "ctrl", "pod", "ns", "Normal", "A", "R", "ctrl", "po", "dns")
	f.Add("", "", "", "", "", "", "", "", "", "", "", "")
	f.Add("a\x00", "b", "", "", "x", "", "a", "\x00b", "", "", "", "x")
	// Lengths on either side of the one-byte prefix (127, 128) and past it.
	long := func(n int) string { return strings.Repeat("n", n) }
	f.Add("Normal", long(127), "R", "c", long(128), "ns", "Normal", long(127), "R", "c", long(128)[1:], "nsn")
	f.Add(long(300), "A", "", "", "", "", long(299), "A", "", "", "", "")
	f.Fuzz(func(t *testing.T, t1, a1, r1, c1, n1, ns1, t2, a2, r2, c2, n2, ns2 string) {
		k1 := seriesKeyFields{typ: t1, action: a1, reason: r1, controller: c1,
			regarding: corev1.ObjectReference{Name: n1, Namespace: ns1}, related: corev1.ObjectReference{FieldPath: ns2}}
		k2 := seriesKeyFields{typ: t2, action: a2, reason: r2, controller: c2,
			regarding: corev1.ObjectReference{Name: n2, Namespace: ns2}, related: corev1.ObjectReference{FieldPath: ns1}}
		if got, want := seriesKey(eventFor(k1)) == seriesKey(eventFor(k2)), k1 == k2; got != want {
			t.Errorf("keys equal: %v, fields equal: %v\n%+v\n%+v", got, want, k1, k2)
		}
	})
}

// A field of 128 bytes or more is prefixed with its length as a uvarint of
// two bytes or more, as a shorter one with its one byte.
func TestSeriesKeyPrefixesEachFieldWithItsUvarintLength(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 300, 70000} {
		reason := strings.Repeat("r", n)
		key := appendSeriesKey(nil, &eventsv1.Event{Type: "Normal", Reason: reason})
		want := append([]byte{6}, "Normal"...)
		want = append(want, 0) // Action
		want = append(binary.AppendUvarint(want, uint64(n)), reason...)
		assert.Equal(t, want, key[:len(want)], "reason of %d bytes", n)
		assert.Len(t, key, len(want)+2+14, "reason of %d bytes: then 16 empty fields", n)
	}
}

// A missing related object keys as an empty one, as in client-go.
func TestSeriesKeyNilRelatedIsEmpty(t *testing.T) {
	ev := eventFor(seriesKeyFields{typ: "Normal", reason: "R"})
	withEmpty := ev.DeepCopy()
	withEmpty.Related = &corev1.ObjectReference{}
	assert.Equal(t, seriesKey(ev), seriesKey(withEmpty))
}

// SeriesEvicted keeps counting the series evicted by a sink whose
// recording has ended.
func TestSeriesEvictedCountsEndedSinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, err := New(sink, WithCacheSize(1))
		require.NoError(t, err)
		defer b.Shutdown()
		ctx, cancel := context.WithCancel(quietCtx(context.Background()))
		require.NoError(t, b.StartRecordingToSinkWithContext(ctx))
		r := b.NewRecorder(testScheme(), "ctrl").WithLogger(quiet)
		for _, p := range []*corev1.Pod{pod("a", "ns"), pod("a", "ns"), pod("a", "ns"), pod("b", "ns")} {
			r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
		}
		flush(t, b)
		require.EqualValues(t, 1, b.SeriesEvicted())
		cancel()
		synctest.Wait()
		assert.EqualValues(t, 1, b.SeriesEvicted())
		s := b.Stats()
		assert.EqualValues(t, 1, s.DroppedFull, "a's merged third occurrence")
		assert.Zero(t, s.Merged)
	})
}

// BenchmarkSeriesCorrelate measures a sink's series correlation per
// occurrence: one key seen again and again (merged into its series), and
// occurrences spread over more keys than the cache holds (each one new,
// evicting another).
func BenchmarkSeriesCorrelate(b *testing.B) {
	const keys = 10000
	evs := make([]*eventsv1.Event, keys)
	for i := range evs {
		evs[i] = makeEvent(bubbleStart, &corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprint("pod-", i), Namespace: "ns"}, nil, nil,
			corev1.EventTypeWarning, "BackOff", "Restart", "back-off", "ctrl", "ctrl-host")
	}
	for _, bc := range []struct {
		name string
		n    int
	}{{"merged", 1}, {"keys=10000", keys}} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := newSeriesCorrelator(fanout.DefaultCacheSize)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c.Correlate(evs[i%bc.n])
				i++
			}
		})
	}
}

// The fast path of the series patch gives client-go's bytes on every event
// it takes, and takes every event with a series observed at some time.
func TestSeriesPatchFastPath(t *testing.T) {
	times := []time.Time{{}, time.Unix(0, 0), time.Unix(0, 999), time.Unix(1, 0), time.Unix(1_700_000_000, 123456789),
		time.Date(2026, 11, 21, 23, 59, 59, 0, time.FixedZone("x", 3600)), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}
	counts := []int32{0, 1, 2, 3, -1, 1 << 30, -(1 << 31)}
	fast := 0
	for _, ts := range times {
		for _, n := range counts {
			for _, note := range []string{"", "plain", "bad utf8 \xff", "<b>&amp;</b>"} {
				ev := &eventsv1.Event{
					ObjectMeta: metav1.ObjectMeta{Name: "web.1", Namespace: "ns", ResourceVersion: "7"},
					Note:       note, Reason: "R", Action: "A", Type: "Normal", EventTime: metav1.NewMicroTime(time.Unix(5, 0)),
					Series: &eventsv1.EventSeries{Count: n, LastObservedTime: metav1.NewMicroTime(ts)},
				}
				want, err := slowSeriesPatch(ev)
				require.NoError(t, err)
				got, ok := fastSeriesPatch(ev)
				if ok {
					fast++
					assert.Equal(t, string(want), string(got), "count %d, time %v, note %q", n, ts, note)
				} else {
					assert.True(t, ts.IsZero(), "the fast path takes %v", ts)
				}
				p, err := seriesPatch(ev)
				require.NoError(t, err)
				assert.Equal(t, string(want), string(p))
			}
		}
	}
	assert.Equal(t, (len(times)-1)*len(counts)*4, fast)
	_, ok := fastSeriesPatch(&eventsv1.Event{})
	assert.False(t, ok, "no series")
}

// A repeat merged into its series costs no allocation: its key is built
// in the correlator's buffer (AppendKey), not as a string per occurrence.
func TestSeriesCorrelatorMergesARepeatWithoutAllocating(t *testing.T) {
	c, err := newSeriesCorrelator(fanout.DefaultCacheSize)
	require.NoError(t, err)
	ev := makeEvent(bubbleStart, &corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "ns"}, nil, nil,
		corev1.EventTypeWarning, "BackOff", "Restart", "back-off", "ctrl", "ctrl-host")
	c.Correlate(ev)
	c.Correlate(ev) // the series of 2, written
	var r fanout.Correlation[*eventsv1.Event]
	if n := testing.AllocsPerRun(100, func() { r = c.Correlate(ev) }); n != 0 {
		t.Errorf("a merged repeat allocated %v times, want 0", n)
	}
	assert.True(t, r.Merged)
}
