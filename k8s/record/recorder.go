package record

import (
	"errors"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/internal/guard"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
	"github.com/fanout-go/fanout/k8s/record/util"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ref "k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"
)

// recorder is the EventRecorderLogger of a Broadcaster.
type recorder struct {
	b      *Broadcaster
	scheme *runtime.Scheme
	source v1.EventSource
	logger klog.Logger
}

var _ EventRecorderLogger = (*recorder)(nil)

func (r *recorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.generate(object, nil, eventtype, reason, message)
}

func (r *recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	r.generate(object, nil, eventtype, reason, adapt.Sprintf(messageFmt, args))
}

func (r *recorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	r.generate(object, annotations, eventtype, reason, adapt.Sprintf(messageFmt, args))
}

func (r *recorder) WithLogger(logger klog.Logger) EventRecorderLogger {
	c := *r
	c.logger = logger
	return &c
}

// reference returns obj's object reference (adapt.Reference); a nil
// object or reference, or a panicking object, is an error.
func reference(scheme *runtime.Scheme, obj runtime.Object) (objRef v1.ObjectReference, err error) {
	if obj == nil {
		return objRef, ref.ErrNilObject // client-go's error
	}
	if perr := guard.Call(func() { objRef, err = adapt.Reference(scheme, obj) }); perr != nil {
		return objRef, perr
	}
	if errors.Is(err, adapt.ErrNilReference) {
		err = errors.New("object reference is nil")
	}
	return objRef, err
}

// generate builds the event as client-go's recorder does and records it,
// synchronously and without blocking. An event that cannot be built is
// logged and counted as invalid.
func (r *recorder) generate(object runtime.Object, annotations map[string]string, eventtype, reason, message string) {
	b := r.b
	objRef, err := reference(r.scheme, object)
	if err != nil {
		b.counters.Invalid.Add(1)
		r.logger.Error(err, "Could not construct reference, will not report event",
			"object", object, "eventType", eventtype, "reason", reason, "message", message)
		return
	}
	if !util.ValidateEventType(eventtype) {
		b.counters.Invalid.Add(1)
		r.logger.Error(nil, "Unsupported event type", "eventType", eventtype)
		return
	}
	t := metav1.Time{Time: b.clock.Now()}
	namespace := objRef.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	e := &v1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:        util.GenerateEventName(objRef.Name, t.UnixNano()),
			Namespace:   namespace,
			Annotations: annotations,
		},
		InvolvedObject:      objRef,
		Reason:              reason,
		Message:             message,
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                eventtype,
		Source:              r.source,
		ReportingController: r.source.Component,
		ReportingInstance:   r.source.Host,
	}
	if err := b.rec.Record(e); err != nil {
		if errors.Is(err, fanout.ErrStopped) {
			b.counters.Stopped.Add(1)
		}
		r.logger.Error(err, "Unable to record event (will not retry!)")
	}
}

// EventRecorderAdapter makes an [EventRecorderLogger] (core/v1 events) an
// events.k8s.io recorder, as client-go's EventRecorderAdapter: the related
// object and the action are dropped.
type EventRecorderAdapter struct {
	recorder EventRecorderLogger
}

var _ events.EventRecorderLogger = (*EventRecorderAdapter)(nil)

// NewEventRecorderAdapter returns an adapter of recorder. A nil recorder
// gives an adapter that records nothing.
func NewEventRecorderAdapter(recorder EventRecorderLogger) *EventRecorderAdapter {
	return &EventRecorderAdapter{recorder: recorder}
}

// Eventf records an event about regarding with note as the message format.
func (a *EventRecorderAdapter) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	if a == nil || a.recorder == nil {
		return
	}
	a.recorder.Eventf(regarding, eventtype, reason, note, args...)
}

// AnnotatedEventf is Eventf with annotations.
func (a *EventRecorderAdapter) AnnotatedEventf(regarding, _ runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...interface{}) {
	if a == nil || a.recorder == nil {
		return
	}
	a.recorder.AnnotatedEventf(regarding, annotations, eventtype, reason, note, args...)
}

// WithLogger returns an adapter whose recorder logs to logger.
func (a *EventRecorderAdapter) WithLogger(logger klog.Logger) events.EventRecorderLogger {
	if a == nil || a.recorder == nil {
		return &EventRecorderAdapter{}
	}
	return &EventRecorderAdapter{recorder: a.recorder.WithLogger(logger)}
}
