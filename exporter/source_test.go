package exporter

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// chanTarget records what a source forwards, as "<key>" for an
// occurrence and "-<uid>" for a deletion.
type chanTarget struct{ ch chan string }

func (c chanTarget) Occurred(ctx context.Context, o *Occurrence) error {
	select {
	case c.ch <- o.Key():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c chanTarget) Deleted(uid, _ string) { c.ch <- "-" + uid }

func (chanTarget) Progress(string) {}

// expect reads the next n things forwarded and compares them with want.
func (c chanTarget) expect(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case got := <-c.ch:
			if got != w {
				t.Fatalf("forwarded %q, want %q", got, w)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("nothing forwarded within 30s, want %q", w)
		}
	}
}

// expectSet reads the next len(want) things forwarded and checks that
// they are want, in any order.
func (c chanTarget) expectSet(t *testing.T, want ...string) {
	t.Helper()
	got := map[string]bool{}
	for range want {
		select {
		case k := <-c.ch:
			got[k] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("forwarded only %v, want %v", got, want)
		}
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("forwarded %v, want %q among them", got, w)
		}
	}
}

func coreEvent(uid string, count int32) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p"},
		Reason:         "BackOff", Message: "back-off", Type: corev1.EventTypeWarning, Count: count,
		Source: corev1.EventSource{Component: "kubelet"}, LastTimestamp: metav1.Now()}
}

func startSource(t *testing.T, cs *fake.Clientset, api string, ck *Checkpoint) chanTarget {
	t.Helper()
	target, _ := startSourceStats(t, cs, api, ck)
	return target
}

// startSourceStats is startSource that also returns the source.
func startSourceStats(t *testing.T, cs *fake.Clientset, api string, ck *Checkpoint) (chanTarget, *Source) {
	t.Helper()
	return startSourceAged(t, cs, api, ck, 0)
}

// startSourceAged is startSourceStats with the age cut-off maxAge.
func startSourceAged(t *testing.T, cs *fake.Clientset, api string, ck *Checkpoint, maxAge time.Duration) (chanTarget, *Source) {
	t.Helper()
	target := chanTarget{ch: make(chan string, 100)}
	src, err := NewSource(cs, api, "", target, ck, nil)
	if err != nil {
		t.Fatal(err)
	}
	src.SetMaxAge(maxAge)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return target, src
}

func TestSourceForwardsNewEventsAndCountRaisesOnly(t *testing.T) {
	cs := fake.NewClientset()
	target := startSource(t, cs, CoreV1, nil)
	ctx := context.Background()
	events := cs.CoreV1().Events("ns")
	e, err := events.Create(ctx, coreEvent("a", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	target.expect(t, "a/1")
	e.Message = "edited, count unchanged"
	if e, err = events.Update(ctx, e, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Count = 4 // three repeats folded into one modification: one occurrence
	if _, err = events.Update(ctx, e, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	target.expect(t, "a/4") // the message edit forwarded nothing before it
	if err := events.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	target.expect(t, "-a")
}

// A watch may hand the same object to others (the fake clientset hands its
// stored object, and reads it as the next Update comes): the source
// leaves the managed fields out of its records without writing to the
// object it was given.
func TestOccurrenceLeavesManagedFieldsOutWithoutWritingToTheWatchedObject(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
	core := coreEvent("a", 1)
	core.ManagedFields = managed
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: "s", ManagedFields: managed},
		EventTime: metav1.NowMicro(), Reason: "Synced", Type: "Normal", Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p"}}
	for _, obj := range []runtime.Object{core, ev} {
		o := occurrenceOf(obj)
		if got := o.coreEvent().ManagedFields; got != nil {
			t.Errorf("%T: the record keeps the managed fields %v", obj, got)
		}
		if m := obj.(metav1.Object); len(m.GetManagedFields()) != 1 {
			t.Errorf("%T: the watched object's managed fields became %v", obj, m.GetManagedFields())
		}
	}
}

func TestSourceAfterRestartForwardsOnlyWhatWasMissed(t *testing.T) {
	cs := fake.NewClientset(coreEvent("seen", 3), coreEvent("raised", 5), coreEvent("new", 1))
	ck := &Checkpoint{Counts: map[string]int32{"seen": 3, "raised": 2, "gone": 7}}
	target := startSource(t, cs, CoreV1, ck)
	target.expectSet(t, "raised/5", "new/1", "-gone")
}

func TestSourceIdentifiesSeriesOccurrencesBySeriesCount(t *testing.T) {
	cs := fake.NewClientset()
	target := startSource(t, cs, EventsV1, nil)
	ctx := context.Background()
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: "s"},
		EventTime: metav1.NowMicro(), ReportingController: "ctl", ReportingInstance: "i", Action: "Sync",
		Reason: "Synced", Type: "Normal", Note: "n", Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p"}}
	e, err := cs.EventsV1().Events("ns").Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	target.expect(t, "s/1")
	e.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NowMicro()}
	if e, err = cs.EventsV1().Events("ns").Update(ctx, e, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	target.expect(t, "s/2")
	e.Series.Count = 9
	if _, err = cs.EventsV1().Events("ns").Update(ctx, e, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	target.expect(t, "s/9")
}

// watchedFrom records the resource version of every watch of cs, and makes
// watches from tooOld fail with 410 Gone as the API server does.
func watchedFrom(cs *fake.Clientset, tooOld string) chan string {
	rvs := make(chan string, 10)
	cs.PrependWatchReactor("events", func(a k8stesting.Action) (bool, watch.Interface, error) {
		rv := a.(k8stesting.WatchActionImpl).WatchRestrictions.ResourceVersion
		rvs <- rv
		if rv == tooOld {
			return true, nil, apierrors.NewResourceExpired("too old resource version: " + rv)
		}
		return false, nil, nil
	})
	return rvs
}

// listRV returns the resource version a list of cs's events gives.
func listRV(t *testing.T, cs *fake.Clientset) string {
	t.Helper()
	l, err := cs.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.ResourceVersion
}

func TestSourceResumesTheWatchFromTheCheckpointWithoutListing(t *testing.T) {
	cs := fake.NewClientset(coreEvent("seen", 3))
	rv := listRV(t, cs)
	rvs := watchedFrom(cs, "")
	lists := 0 // of events: not the one-event list that asks for rv
	cs.PrependReactor("list", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.ListActionImpl).ListOptions.Limit != 1 {
			lists++
		}
		return false, nil, nil
	})
	raised := coreEvent("seen", 4)
	if _, err := cs.CoreV1().Events("ns").Update(t.Context(), raised, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	target, src := startSourceStats(t, cs, CoreV1, &Checkpoint{ResourceVersion: rv, Counts: map[string]int32{"seen": 3}})
	target.expect(t, "seen/4")
	if got := <-rvs; got != rv {
		t.Errorf("watched from resource version %q, want the checkpoint's %q", got, rv)
	}
	if st := src.Stats(); lists != 0 || st.Relists != 0 || st.Collapsed != 0 {
		t.Errorf("%d lists, stats %+v: want none", lists, st)
	}
}

func TestSourceListsWhenTheCheckpointResourceVersionIsTooOldAndCountsCollapsedRaises(t *testing.T) {
	cs := fake.NewClientset(coreEvent("seen", 3), coreEvent("raised", 5), coreEvent("new", 4))
	rvs := watchedFrom(cs, "1")
	ck := &Checkpoint{ResourceVersion: "1", Counts: map[string]int32{"seen": 3, "raised": 2, "gone": 7}}
	target, src := startSourceStats(t, cs, CoreV1, ck)
	target.expectSet(t, "raised/5", "new/4", "-gone")
	if first, second := <-rvs, <-rvs; first != "1" || second == "1" || second == "" {
		t.Errorf("watched from %q then %q: want the checkpoint's, then the list's", first, second)
	}
	waitSynced(t, src)
	// raised: 3 and 4 folded into 5; new: 1, 2 and 3 folded into 4.
	if st := src.Stats(); st.Lists != 1 || st.Relists != 1 || st.Collapsed != 5 {
		t.Errorf("stats %+v: want 1 list, 1 relist, 5 collapsed raises", st)
	}
}

func TestSourceFirstListWithoutCheckpointCollapsesNothing(t *testing.T) {
	cs := fake.NewClientset(coreEvent("old", 9))
	target, src := startSourceStats(t, cs, CoreV1, nil)
	target.expect(t, "old/9")
	waitSynced(t, src)
	if st := src.Stats(); st.Lists != 1 || st.Relists != 0 || st.Collapsed != 0 {
		t.Errorf("stats %+v: want 1 list and nothing counted as collapsed", st)
	}
}

// A checkpoint without a resource version was written before the sinks
// were done with its first list (a first start stopped early): the events
// it counts are resumed, and those it does not are cut off by age as that
// first start would have, not exported however old.
func TestSourceCutsOffOldEventsACheckpointWithoutResourceVersionDoesNotCount(t *testing.T) {
	cs := fake.NewClientset(oldEvent("counted", 2, 40*time.Minute), oldEvent("uncounted", 1, 40*time.Minute),
		coreEvent("fresh", 1))
	ck := &Checkpoint{Counts: map[string]int32{"counted": 1}}
	target, src := startSourceAged(t, cs, CoreV1, ck, 5*time.Minute)
	target.expectSet(t, "counted/2", "fresh/1")
	waitSynced(t, src)
	select {
	case k := <-target.ch:
		t.Errorf("forwarded %s, want nothing more", k)
	default:
	}
	if st := src.Stats(); st.TooOld != 1 || st.Collapsed != 0 {
		t.Errorf("stats %+v: want 1 too old (uncounted), nothing collapsed", st)
	}
}

// An event without lastTimestamp is last seen at its eventTime, as
// kubernetes-event-exporter ages it (lastTimestamp, else eventTime), not
// at its firstTimestamp: one first seen 40 minutes ago whose eventTime is
// now passes the cut-off; with neither lastTimestamp nor eventTime, its
// firstTimestamp ages it.
func TestSourceAgesAnEventWithoutLastTimestampByItsEventTime(t *testing.T) {
	recent := coreEvent("recent", 1)
	recent.LastTimestamp = metav1.Time{}
	recent.FirstTimestamp = metav1.NewTime(time.Now().Add(-40 * time.Minute))
	recent.EventTime = metav1.NewMicroTime(time.Now())
	old := coreEvent("old", 1)
	old.LastTimestamp = metav1.Time{}
	old.FirstTimestamp = metav1.NewTime(time.Now().Add(-40 * time.Minute))
	cs := fake.NewClientset(recent, old)
	target, src := startSourceAged(t, cs, CoreV1, nil, 5*time.Minute)
	target.expect(t, "recent/1")
	waitSynced(t, src)
	select {
	case k := <-target.ch:
		t.Errorf("forwarded %s, want nothing more", k)
	default:
	}
	if st := src.Stats(); st.TooOld != 1 {
		t.Errorf("stats %+v: want 1 too old (old)", st)
	}
}

// A checkpoint with a resource version decides: an event it does not
// count came after it, and is exported at a list however old.
func TestSourceCutsNothingOffAtAListAfterACheckpointWithAResourceVersion(t *testing.T) {
	cs := fake.NewClientset(oldEvent("old", 1, 40*time.Minute))
	watchedFrom(cs, "1")
	ck := &Checkpoint{ResourceVersion: "1", Counts: map[string]int32{"gone": 1}}
	target, _ := startSourceAged(t, cs, CoreV1, ck, 5*time.Minute)
	target.expectSet(t, "old/1", "-gone")
}

// waitSynced waits until src has handled its list or resumed its watch.
func waitSynced(t *testing.T, src *Source) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !src.Synced(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not synced within 30s")
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSourceLogsEveryRetryOfAFailingWatchWithADoublingDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		cs.PrependWatchReactor("events", func(k8stesting.Action) (bool, watch.Interface, error) {
			return true, nil, errors.New("connection refused")
		})
		var log syncBuffer
		src, err := NewSource(cs, CoreV1, "", chanTarget{ch: make(chan string, 1)}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		src.SetLogger(slog.New(slog.NewTextHandler(&log, nil)))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); src.Run(ctx) }()
		time.Sleep(2 * time.Second) // fake time: retries after 250 ms, 500 ms and 1 s
		synctest.Wait()
		cancel()
		<-done
		var delays []string
		for line := range strings.Lines(log.String()) {
			if strings.Contains(line, "watching events failed: retrying") && strings.Contains(line, "connection refused") {
				_, d, _ := strings.Cut(line, "retryIn=")
				delays = append(delays, strings.TrimSpace(d))
			}
		}
		if want := []string{"250ms", "500ms", "1s", "2s"}; !slices.Equal(delays, want) {
			t.Errorf("retries logged with delays %v, want %v:\n%s", delays, want, log.String())
		}
	})
}

// tooLargeReactor makes cs behave as a kube-apiserver that has not
// reached resource version rv while tooLarge returns true: it answers a
// list not older than rv "Too large resource version", and starts a watch
// from rv that sends nothing (new events included). Each list's or
// watch's resource version goes to rvs.
func tooLargeReactor(cs *fake.Clientset, rv string, tooLarge func() bool, rvs chan<- string) {
	cs.PrependReactor("list", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		o := a.(k8stesting.ListActionImpl).ListOptions
		rvs <- "list " + o.ResourceVersion
		if o.ResourceVersion == rv && tooLarge() {
			err := apierrors.NewTimeoutError("Too large resource version: "+rv+", current: 12", 1)
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
			return true, nil, err
		}
		return false, nil, nil
	})
	cs.PrependWatchReactor("events", func(a k8stesting.Action) (bool, watch.Interface, error) {
		from := a.(k8stesting.WatchActionImpl).WatchRestrictions.ResourceVersion
		rvs <- "watch " + from
		if from == rv && tooLarge() {
			return true, watch.NewFake(), nil // silent, as a real server's
		}
		return false, nil, nil
	})
}

// A checkpoint's resource version that the API server has not reached (an
// etcd restored from a backup): a kube-apiserver starts a watch from it
// that sends nothing, new events included, and answers a list not older
// than it "Too large resource version". The source asks before it
// resumes, and after 30 s of such answers it lists, and forwards what the
// list shows. It resumed a silent watch and forwarded nothing.
func TestSourceListsWhenTheAPIServerStaysBehindTheCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset(coreEvent("seen", 3), coreEvent("new", 1))
		rvs := make(chan string, 100)
		tooLargeReactor(cs, "999999", func() bool { return true }, rvs)
		ck := &Checkpoint{ResourceVersion: "999999", Counts: map[string]int32{"seen": 3}}
		target, src := startSourceStats(t, cs, CoreV1, ck)
		time.Sleep(tooLargeFor - time.Second)
		synctest.Wait()
		if st := src.Stats(); st.Lists != 0 || len(target.ch) != 0 {
			t.Fatalf("%v after a too large answer: stats %+v, %d forwarded; want it asked again", tooLargeFor-time.Second, st, len(target.ch))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(target.ch) == 0 {
			t.Fatalf("nothing forwarded %v after the first too large answer (stats %+v): want a list", tooLargeFor, src.Stats())
		}
		if got := <-target.ch; got != "new/1" || len(target.ch) != 0 {
			t.Errorf("forwarded %q and %d more, want new/1 only", got, len(target.ch))
		}
		if st := src.Stats(); st.Lists != 1 || st.Relists != 1 || st.Watches != 1 {
			t.Errorf("stats %+v: want 1 list (a relist), then 1 watch", st)
		}
	})
}

// An API server whose watch cache lags (a kube-apiserver restarting) may
// answer "Too large resource version" for a moment: the source asks again
// and resumes its watch from the checkpoint, with no list, so that no
// count raise made meanwhile collapses into one occurrence.
func TestSourceResumesFromACheckpointTheAPIServerReachesAMomentLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset(coreEvent("seen", 3))
		rvs := make(chan string, 100)
		var answers atomic.Int32
		tooLargeReactor(cs, "5", func() bool { return answers.Add(1) <= 3 }, rvs)
		ck := &Checkpoint{ResourceVersion: "5", Counts: map[string]int32{"seen": 3}}
		_, src := startSourceStats(t, cs, CoreV1, ck)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if st := src.Stats(); st.Lists != 0 || st.Watches != 1 {
			t.Errorf("stats %+v: want no list, and the watch resumed", st)
		}
		var got []string
		for len(rvs) > 0 {
			got = append(got, <-rvs)
		}
		if want := []string{"list 5", "list 5", "list 5", "list 5", "watch 5"}; !slices.Equal(got, want) {
			t.Errorf("requests %q, want %q", got, want)
		}
	})
}
