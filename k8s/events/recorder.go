package events

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/fanout-go/fanout/internal/guard"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
	"github.com/fanout-go/fanout/k8s/record/util"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"
)

// recorder is the EventRecorderLogger of a Broadcaster. It builds each
// event on the caller's goroutine and queues it without blocking: no
// goroutine per event, unlike client-go's up to v0.37.
type recorder struct {
	b          *Broadcaster
	scheme     *runtime.Scheme
	controller string
	instance   string
	logger     klog.Logger
}

var (
	_ EventRecorderLogger    = (*recorder)(nil)
	_ AnnotatedEventRecorder = (*recorder)(nil)
)

// Eventf records an event about regarding (and related, which may be nil).
// An event that cannot be built is logged and counted as Invalid.
func (r *recorder) Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	r.record(regarding, related, nil, eventtype, reason, action, note, args)
}

// AnnotatedEventf is Eventf with annotations on the event (copied).
func (r *recorder) AnnotatedEventf(regarding runtime.Object, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...interface{}) {
	r.record(regarding, related, annotations, eventtype, reason, action, note, args)
}

// WithLogger returns a recorder of the same broadcaster and controller
// that logs to logger.
func (r *recorder) WithLogger(logger klog.Logger) EventRecorderLogger {
	c := *r
	c.logger = logger
	return &c
}

func (r *recorder) record(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args []interface{}) {
	now := time.Now()
	message := adapt.Sprintf(note, args)
	regardingRef, err := objectReference(r.scheme, regarding)
	if err != nil {
		r.logger.Error(err, "Could not construct reference, will not report event", "object", regarding, "eventType", eventtype, "reason", reason, "message", message)
		r.b.counters.Invalid.Add(1)
		return
	}
	var relatedRef *corev1.ObjectReference
	if related != nil {
		if ref, err := objectReference(r.scheme, related); err != nil {
			r.logger.V(9).Info("Could not construct reference", "object", related, "err", err)
		} else {
			relatedRef = &ref // a copy: the event never shares the caller's reference
		}
	}
	if !util.ValidateEventType(eventtype) {
		r.logger.Error(nil, "Unsupported event type", "eventType", eventtype)
		r.b.counters.Invalid.Add(1)
		return
	}
	ev := makeEvent(now, &regardingRef, relatedRef, annotations, eventtype, reason, action, message, r.controller, r.instance)
	if err := r.b.rec.Record(ev); err != nil {
		// Only after Shutdown: the runners' queues drop silently.
		r.b.counters.Stopped.Add(1)
	}
}

// makeEvent builds the event as client-go's recorder does.
func makeEvent(now time.Time, regarding, related *corev1.ObjectReference, annotations map[string]string, eventtype, reason, action, note, controller, instance string) *eventsv1.Event {
	namespace := regarding.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:        util.GenerateEventName(regarding.Name, now.UnixNano()),
			Namespace:   namespace,
			Annotations: maps.Clone(annotations),
		},
		EventTime:           metav1.MicroTime{Time: now},
		ReportingController: controller,
		ReportingInstance:   instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *regarding,
		Related:             related,
		Note:                note,
		Type:                eventtype,
	}
}

// objectReference is reference.GetReference made total, and returning the
// reference itself (adapt.Reference): a nil object or reference, or an
// object whose methods panic (a typed nil pointer, say), is an error.
func objectReference(scheme *runtime.Scheme, obj runtime.Object) (ref corev1.ObjectReference, err error) {
	if obj == nil {
		return ref, reference.ErrNilObject // client-go's error
	}
	if perr := guard.Call(func() { ref, err = adapt.Reference(scheme, obj) }); perr != nil {
		return ref, fmt.Errorf("can't reference object %T: %w", obj, perr)
	}
	if errors.Is(err, adapt.ErrNilReference) {
		err = reference.ErrNilObject
	}
	return ref, err
}
