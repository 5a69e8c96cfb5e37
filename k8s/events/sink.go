package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/fanout-go/fanout/internal/guard"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
	"github.com/fanout-go/fanout/k8s/record/util"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// EventSinkImpl is the [EventSink] of a typed events.k8s.io/v1 client, as
// client-go's: each call goes to the namespace of the event, and an event
// without a namespace is an error.
type EventSinkImpl struct {
	Interface typedeventsv1.EventsV1Interface
}

var _ EventSink = (*EventSinkImpl)(nil)

// Create creates event and returns the server's copy of it.
func (e *EventSinkImpl) Create(ctx context.Context, event *eventsv1.Event) (*eventsv1.Event, error) {
	if event.Namespace == "" {
		return nil, errors.New("can't create an event with empty namespace")
	}
	return e.Interface.Events(event.Namespace).Create(ctx, event, metav1.CreateOptions{})
}

// Update replaces event and returns the server's copy of it.
func (e *EventSinkImpl) Update(ctx context.Context, event *eventsv1.Event) (*eventsv1.Event, error) {
	if event.Namespace == "" {
		return nil, errors.New("can't update an event with empty namespace")
	}
	return e.Interface.Events(event.Namespace).Update(ctx, event, metav1.UpdateOptions{})
}

// Patch applies the strategic merge patch data to the event named by
// event's namespace and name, and returns the server's copy of the result.
func (e *EventSinkImpl) Patch(ctx context.Context, event *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if event.Namespace == "" {
		return nil, errors.New("can't patch an event with empty namespace")
	}
	return e.Interface.Events(event.Namespace).Patch(ctx, event.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}

// sinkAdapter makes an EventSink a [fanout.Sink], with client-go's
// recordEvent: an event without Series is created; one with Series is
// patched, and created (resource version cleared) when the patch finds no
// event. Errors are logged as client-go logs them and returned so that
// adapt.Retryable classifies them as client-go does: a request that cannot
// be built and API status errors are final, anything else is retried; an
// AlreadyExists answer to a series write is retried too (the first event
// and its series raced), hence its wrapper.
//
// Create and Update take the same path (the event's Series decides), with
// the context of the StartRecordingToSinkWithContext call, cancelled when
// that ends or when a shutdown's context ends; the runner's context is not
// needed.
type sinkAdapter struct {
	sink   EventSink
	ctx    context.Context
	logger klog.Logger

	// The attempts so far of each event being written, to log the last
	// one as client-go does: the runner retries with the same value. The
	// runner's writers share the adapter, hence the lock.
	mu    sync.Mutex
	tries map[*eventsv1.Event]int
}

// Create writes an event seen for the first time.
func (a *sinkAdapter) Create(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return a.attempt(ev)
}

// Update writes the series of an event seen again.
func (a *sinkAdapter) Update(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return a.attempt(ev)
}

// safeWrite is write for the maintenance goroutine: a panic in the sink is
// logged and returned as a final error instead of crashing the process.
func (a *sinkAdapter) safeWrite(ev *eventsv1.Event) (stored *eventsv1.Event, err error) {
	if p := guard.Call(func() { stored, err = a.write(ev) }); p != nil {
		perr := fmt.Errorf("events: sink panicked: %w", p)
		a.logger.Error(perr, "Event sink panicked, event dropped", "event", ev)
		return nil, &restclient.RequestConstructionError{Err: perr}
	}
	return stored, err
}

// attempt is write for the runner, which logs when the last try fails. A
// panic in the sink is logged with the sink's logger and passed on to the
// runner, which drops the event (counted as rejected).
func (a *sinkAdapter) attempt(ev *eventsv1.Event) (*eventsv1.Event, error) {
	defer func() {
		if p := recover(); p != nil {
			a.forget(ev)
			a.logger.Error(fmt.Errorf("%v", p), "Event sink panicked, event dropped", "event", ev)
			panic(p)
		}
	}()
	tries := a.try(ev)
	stored, err := a.write(ev)
	if err == nil || tries >= maxTriesPerEvent || !adapt.Retryable(err) {
		if err != nil && tries >= maxTriesPerEvent && adapt.Retryable(err) {
			a.logger.Error(nil, "Unable to write event (retry limit exceeded!)", "event", ev)
		}
		a.forget(ev)
	}
	return stored, err
}

// try counts an attempt to write ev and returns the attempts so far.
func (a *sinkAdapter) try(ev *eventsv1.Event) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tries == nil {
		a.tries = make(map[*eventsv1.Event]int)
	}
	a.tries[ev]++
	return a.tries[ev]
}

// forget drops the count of ev's attempts: its write is over.
func (a *sinkAdapter) forget(ev *eventsv1.Event) {
	a.mu.Lock()
	delete(a.tries, ev)
	a.mu.Unlock()
}

// write makes one attempt; ev is a private copy.
func (a *sinkAdapter) write(ev *eventsv1.Event) (*eventsv1.Event, error) {
	ctx := a.ctx
	isSeries := ev.Series != nil
	var stored *eventsv1.Event
	var err error
	if isSeries {
		patch, perr := seriesPatch(ev)
		if perr != nil {
			a.logger.Error(perr, "Unable to calculate diff, no merge is possible")
			// Final, as client-go: the same event gives the same failure.
			return nil, &restclient.RequestConstructionError{Err: perr}
		}
		stored, err = a.sink.Patch(ctx, ev, patch)
	}
	if !isSeries || util.IsKeyNotFoundError(err) {
		ev.ResourceVersion = ""
		stored, err = a.sink.Create(ctx, ev)
	}
	if err == nil {
		return stored, nil
	}
	switch err.(type) {
	case *restclient.RequestConstructionError:
		a.logger.Error(err, "Unable to construct event (will not retry!)", "event", ev)
	case *apierrors.StatusError:
		if apierrors.IsAlreadyExists(err) {
			if isSeries {
				return nil, &seriesRaceError{err: err}
			}
			a.logger.V(5).Info("Server rejected event (will not retry!)", "event", ev, "err", err)
		} else {
			a.logger.Error(err, "Server rejected event (will not retry!)", "event", ev)
		}
	default:
		a.logger.Error(err, "Unable to write event (may retry after sleeping)")
	}
	return nil, err
}

// seriesRaceError is an AlreadyExists answer to the create that follows a
// series patch answered 404: the first event was being created meanwhile,
// and trying again patches it. It is not a *StatusError, so that
// adapt.Retryable retries it.
type seriesRaceError struct{ err error }

func (e *seriesRaceError) Error() string {
	return fmt.Sprintf("event series raced with the creation of its first event: %v", e.err)
}

func (e *seriesRaceError) Unwrap() error { return e.err }

// seriesPatch is the strategic merge patch from ev without Series to ev,
// as client-go's createPatchBytesForSeries. client-go diffs two JSON
// encodings of the event through the strategic-merge machinery (about
// 30 µs a patch, 14% of the CPU time of recording a series in the
// benchmark harness's events group); the two differ only in Series, so
// the usual case is written directly and the rest (no series, a zero last
// observed time) goes the long way. TestSeriesPatchFastPath checks that
// the two agree.
func seriesPatch(ev *eventsv1.Event) ([]byte, error) {
	if p, ok := fastSeriesPatch(ev); ok {
		return p, nil
	}
	return slowSeriesPatch(ev)
}

// fastSeriesPatch writes the patch of an event whose series has a
// non-zero last observed time: {"series":{"count":N,"lastObservedTime":T}},
// keys in the order encoding/json sorts them, values as it encodes them.
func fastSeriesPatch(ev *eventsv1.Event) ([]byte, bool) {
	if ev.Series == nil || ev.Series.LastObservedTime.IsZero() {
		return nil, false
	}
	ts, err := ev.Series.LastObservedTime.MarshalJSON()
	if err != nil {
		return nil, false
	}
	p := make([]byte, 0, 80)
	p = append(p, `{"series":{"count":`...)
	p = strconv.AppendInt(p, int64(ev.Series.Count), 10)
	p = append(p, `,"lastObservedTime":`...)
	p = append(p, ts...)
	return append(p, "}}"...), true
}

// slowSeriesPatch is client-go's computation.
func slowSeriesPatch(ev *eventsv1.Event) ([]byte, error) {
	base := ev.DeepCopy()
	base.Series = nil
	before, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	after, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(before, after, eventsv1.Event{})
}
