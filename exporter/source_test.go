package exporter

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
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

func coreEvent(uid string, count int32) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p"},
		Reason:         "BackOff", Message: "back-off", Type: corev1.EventTypeWarning, Count: count,
		Source: corev1.EventSource{Component: "kubelet"}, LastTimestamp: metav1.Now()}
}

func startSource(t *testing.T, cs *fake.Clientset, api string, ck *Checkpoint) chanTarget {
	t.Helper()
	target := chanTarget{ch: make(chan string, 100)}
	src, err := NewSource(cs, api, "", target, ck, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return target
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

func TestSourceAfterRestartForwardsOnlyWhatWasMissed(t *testing.T) {
	cs := fake.NewClientset(coreEvent("seen", 3), coreEvent("raised", 5), coreEvent("new", 1))
	ck := &Checkpoint{Counts: map[string]int32{"seen": 3, "raised": 2, "gone": 7}}
	target := startSource(t, cs, CoreV1, ck)
	got := map[string]bool{}
	for range 3 {
		select {
		case k := <-target.ch:
			got[k] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("forwarded only %v", got)
		}
	}
	for _, want := range []string{"raised/5", "new/1", "-gone"} {
		if !got[want] {
			t.Errorf("forwarded %v, want %q among them", got, want)
		}
	}
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
