package record

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Correlating a repeat allocates the correlator's two copies of the event
// (the one Repeat marks in place and the one remembered) and the default
// aggregation and spam keys, and nothing else: the dedup key is built in
// the correlator's buffer and Repeat makes no copy of its own.
func TestCorrelatingARepeatCopiesTheEventTwice(t *testing.T) {
	c := newCorrelator(CorrelatorOptions{BurstSize: 1 << 30}, nil)
	e := &v1.Event{InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p"}, Type: v1.EventTypeNormal,
		Reason: "Synced", Message: "synced", Count: 1, LastTimestamp: metav1.NewTime(time.Unix(1_700_000_000, 0))}
	c.Correlate(e)
	if n := testing.AllocsPerRun(100, func() { c.Correlate(e) }); n != 4 {
		t.Errorf("correlating a repeat allocated %v times, want 4", n)
	}
	if r := c.Correlate(e); r.Count < 2 || r.Value == e || e.Count != 1 {
		t.Errorf("correlated %+v: want a repeat in a copy of its own, the event given unchanged (count %d)", r, e.Count)
	}
}
