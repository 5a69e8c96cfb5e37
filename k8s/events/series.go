package events

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// seriesCorrelator is one sink's series state machine, client-go's
// recordToSink, as a configuration of the core [fanout.Correlator]: the
// first occurrence of a key is created, the second turns the remembered
// first event into a series of count 2, written by a patch, and later ones
// only bump the remembered count (merged), which the maintenance
// goroutine writes (refresh and finish). The correlator reports merged
// occurrences it loses to the sink runner, so that the recorder's counters
// include them.
//
// Observe does nothing: as client-go, the runner's writes do not replace
// the remembered event, so that server-side changes cannot break the
// grouping (a refresh does replace it, as client-go's).
type seriesCorrelator struct {
	*fanout.Correlator[*eventsv1.Event]
}

// Observe ignores what the sink stored (see seriesCorrelator).
func (seriesCorrelator) Observe(*eventsv1.Event) {}

func newSeriesCorrelator(size int) (seriesCorrelator, error) {
	c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[*eventsv1.Event]{
		CacheSize: size,
		Clone:     (*eventsv1.Event).DeepCopy,
		Dedup: &fanout.DedupStage[*eventsv1.Event]{
			AppendKey:  appendSeriesKey,
			Merge:      markSeries,
			WriteFirst: 2,
			// The time the occurrence was recorded, as client-go v0.37,
			// whose goroutine per event reads the clock then; the runner may
			// take the event off its queue much later (a slow or
			// retrying sink).
			Time: func(ev *eventsv1.Event) time.Time { return ev.EventTime.Time },
		},
	})
	return seriesCorrelator{c}, err
}

// markSeries marks ev, the remembered event, as a series of n occurrences,
// the latest at last, in place.
func markSeries(ev *eventsv1.Event, n int, last time.Time) *eventsv1.Event {
	if ev.Series == nil {
		ev.Series = &eventsv1.EventSeries{}
	}
	ev.Series.Count = int32(n)
	ev.Series.LastObservedTime = metav1.MicroTime{Time: last}
	return ev
}

// appendSeriesKey appends the key of ev's series to dst, as client-go's
// getKey groups occurrences: everything that says what happened to what
// and who says so, but not the note, the name or the time. A missing
// related object keys as an empty reference, as in client-go. Each field
// is length-prefixed, so that distinct keys never collide.
func appendSeriesKey(dst []byte, ev *eventsv1.Event) []byte {
	dst = appendField(dst, ev.Type)
	dst = appendField(dst, ev.Action)
	dst = appendField(dst, ev.Reason)
	dst = appendField(dst, ev.ReportingController)
	dst = appendField(dst, ev.ReportingInstance)
	dst = appendReference(dst, &ev.Regarding)
	if ev.Related == nil {
		return append(dst, noReference[:]...)
	}
	return appendReference(dst, ev.Related)
}

// noReference is the key of an empty reference: seven empty fields.
var noReference [7]byte

// appendReference appends the key fields of ref.
func appendReference(dst []byte, ref *corev1.ObjectReference) []byte {
	dst = appendField(dst, ref.Kind)
	dst = appendField(dst, ref.Namespace)
	dst = appendField(dst, ref.Name)
	dst = appendField(dst, string(ref.UID))
	dst = appendField(dst, ref.APIVersion)
	dst = appendField(dst, ref.ResourceVersion)
	return appendField(dst, ref.FieldPath)
}

// appendField appends s, prefixed with its length as a uvarint.
func appendField(dst []byte, s string) []byte {
	if len(s) < 0x80 { // the uvarint's one byte, without the call
		dst = append(dst, byte(len(s)))
	} else {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
	}
	return append(dst, s...)
}

// refresh re-writes every open series once, as client-go's
// refreshExistingEventSeries, so that the API server does not expire it;
// a successful write replaces the remembered event by the stored one.
// ctx ends the pass early.
func (s seriesCorrelator) refresh(ctx context.Context, w *sinkAdapter) {
	_ = s.WriteOpen(ctx, fanout.Sweep[*eventsv1.Event]{Write: w.maintenanceWrite})
}

// finish ends idle series, as client-go's finishSeries: a series not seen
// for finishTime is written with its final count and forgotten (also when
// the write is rejected, its merged occurrences then counted as rejected;
// a write worth retrying is tried again next pass), and an event that
// never became a series is forgotten finishTime after it happened. A
// series seen again meanwhile stays open. ctx ends the pass early.
func (s seriesCorrelator) finish(ctx context.Context, w *sinkAdapter) {
	_ = s.WriteOpen(ctx, fanout.Sweep[*eventsv1.Event]{
		Write:     w.maintenanceWrite,
		IdleFor:   finishTime,
		Finish:    true,
		Retryable: adapt.Retryable,
	})
}

// finishUnwritten gives each series holding occurrences not yet written
// its last write, with its final count, and forgets it: at Shutdown, once
// the runner has exited, so that a series ends on the API server with the
// count the recorders saw (client-go leaves it at the count of its last
// write, and loses the rest silently). A series whose count was written in
// full is not written again. ctx, the shutdown's, ends the pass between two
// writes; the write in flight ends with the recording's context, which
// Shutdown cancels when ctx ends. A failed write is counted as a failure,
// and its occurrences as rejected (an API error) or, when the write is
// worth retrying, as dropped at shutdown.
func (s seriesCorrelator) finishUnwritten(ctx context.Context, w *sinkAdapter) {
	_ = s.WriteOpen(ctx, fanout.Sweep[*eventsv1.Event]{
		Write:     w.maintenanceWrite,
		Finish:    true,
		Unwritten: true,
		Retryable: adapt.Retryable,
	})
}

// maintenanceWrite is safeWrite for refresh and finish, with the context
// of the recording (as client-go's), not the pass's: a pass that ends
// early does not cut its write in flight short. A sink that stores
// nothing leaves the written copy remembered.
func (a *sinkAdapter) maintenanceWrite(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	stored, err := a.safeWrite(ev)
	if err == nil && stored == nil {
		return ev, nil
	}
	return stored, err
}
