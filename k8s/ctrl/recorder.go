package fanoutctrl

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	ctrlrecorder "sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/fanout-go/fanout/k8s/events"
	"github.com/fanout-go/fanout/k8s/record"
)

// The recorders of a Manager are made before the manager starts (at setup,
// and for the leader election lock before the broadcasters exist), as
// controller-runtime's: each makes its broadcaster's recorder, and starts
// the manager's sinks, with its first event. After that an event costs one
// atomic load more than the broadcaster's own recorder.

// coreRecorder is the recorder of GetEventRecorderFor.
type coreRecorder struct {
	m      *Manager
	name   string
	logger *logr.Logger // from WithLogger, if called

	once sync.Once
	rec  record.EventRecorderLogger
}

var _ record.EventRecorderLogger = (*coreRecorder)(nil)

func (r *coreRecorder) get() record.EventRecorderLogger {
	r.once.Do(func() {
		r.m.startRecording()
		r.rec = r.m.record.NewRecorder(r.m.scheme, corev1.EventSource{Component: r.name})
		if r.logger != nil {
			r.rec = r.rec.WithLogger(*r.logger)
		}
	})
	return r.rec
}

// Event records an event about object; see [record.EventRecorder].
func (r *coreRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.get().Event(object, eventtype, reason, message)
}

// Eventf records an event with a formatted message.
func (r *coreRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.get().Eventf(object, eventtype, reason, messageFmt, args...)
}

// AnnotatedEventf records an event with annotations.
func (r *coreRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.get().AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
}

// WithLogger returns a recorder of the same name that logs to logger.
func (r *coreRecorder) WithLogger(logger logr.Logger) record.EventRecorderLogger {
	return &coreRecorder{m: r.m, name: r.name, logger: &logger}
}

// eventsRecorder is the recorder of GetEventRecorder.
type eventsRecorder struct {
	m      *Manager
	name   string
	logger *logr.Logger // from WithLogger, if called

	once sync.Once
	rec  events.EventRecorderLogger
	ann  events.AnnotatedEventRecorder
}

var (
	_ ctrlrecorder.EventRecorder = (*eventsRecorder)(nil)
	_ events.EventRecorderLogger = (*eventsRecorder)(nil)
)

func (r *eventsRecorder) get() {
	r.once.Do(func() {
		r.m.startRecording()
		r.rec = r.m.events.NewRecorder(r.m.scheme, r.name)
		if r.logger != nil {
			r.rec = r.rec.WithLogger(*r.logger)
		}
		r.ann = r.rec.(events.AnnotatedEventRecorder)
	})
}

// Eventf records an event about regarding; see [events.EventRecorder].
func (r *eventsRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.get()
	r.rec.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// AnnotatedEventf records an event with annotations.
func (r *eventsRecorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	r.get()
	r.ann.AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, note, args...)
}

// WithLogger returns a recorder of the same controller that logs to
// logger.
func (r *eventsRecorder) WithLogger(logger logr.Logger) events.EventRecorderLogger {
	return &eventsRecorder{m: r.m, name: r.name, logger: &logger}
}

// coreSink is client-go's typedcorev1.EventSinkImpl with a context, which
// the manager cancels when its shutdown bound has passed (see endWrites):
// client-go's writes with context.Background().
type coreSink struct {
	ctx    context.Context
	events typedcorev1.EventInterface
}

func (s *coreSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.events.CreateWithEventNamespaceWithContext(s.ctx, e)
}

func (s *coreSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.events.UpdateWithEventNamespaceWithContext(s.ctx, e)
}

func (s *coreSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.events.PatchWithEventNamespaceWithContext(s.ctx, e, data)
}
