package record

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/fanout-go/fanout/internal/guard"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
)

// FakeRecorder is a recorder for tests: each event becomes the string
// "<type> <reason> <message>" on Events (with " involvedObject{kind=...,
// apiVersion=...}" when IncludeObject is set, and the annotations when
// there are any), as client-go's FakeRecorder.
//
// Unlike client-go's it never blocks for long: when Events is full (or
// unbuffered with no reader waiting) it waits up to [FakeRecorderWait] for
// room, so that a test reading behind the code under test, as with
// client-go, gets every event; then the event is discarded and counted
// ([FakeRecorder.Dropped]), so that a test that records more than it reads
// fails on its assertions instead of hanging. Once a wait has run out, the
// next events do not wait, until one is taken again. With a nil Events
// every event is discarded (not counted). It is safe for concurrent use,
// and usable as a literal &FakeRecorder{Events: ch}.
type FakeRecorder struct {
	Events chan string

	IncludeObject bool
}

var _ EventRecorderLogger = (*FakeRecorder)(nil)

// NewFakeRecorder returns a FakeRecorder whose Events holds bufferSize
// strings (a negative size means 0: every event is discarded unless a
// reader is waiting).
func NewFakeRecorder(bufferSize int) *FakeRecorder {
	return &FakeRecorder{Events: make(chan string, max(bufferSize, 0))}
}

// FakeRecorderWait is how long a [FakeRecorder] waits for room in a full
// Events before it discards the event.
const FakeRecorderWait = time.Second

// fakeDrops holds [FakeRecorder.Dropped]: the struct keeps client-go's
// fields only.
var fakeDrops adapt.FakeDrops[FakeRecorder]

// Dropped returns the number of events discarded because Events was full.
func (f *FakeRecorder) Dropped() uint64 { return fakeDrops.Get(f) }

func objectString(object runtime.Object, includeObject bool) string {
	if !includeObject || object == nil {
		return ""
	}
	var gvk schema.GroupVersionKind
	// A typed-nil object, or one without an ObjectKind, prints empty kind
	// and apiVersion instead of panicking.
	_ = guard.Call(func() { gvk = object.GetObjectKind().GroupVersionKind() })
	return fmt.Sprintf(" involvedObject{kind=%s,apiVersion=%s}", gvk.Kind, gvk.GroupVersion())
}

func annotationsString(annotations map[string]string) string {
	if len(annotations) == 0 {
		return ""
	}
	return " " + fmt.Sprint(annotations)
}

func (f *FakeRecorder) write(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	if f.Events == nil {
		return
	}
	msg := fmt.Sprintf(eventtype+" "+reason+" "+messageFmt, args...) +
		objectString(object, f.IncludeObject) + annotationsString(annotations)
	fakeDrops.Send(f, f.Events, msg, FakeRecorderWait)
}

// Event writes "<eventtype> <reason> <message>" to Events.
func (f *FakeRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	f.write(object, nil, eventtype, reason, "%s", message)
}

// Eventf is Event with a formatted message.
func (f *FakeRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	f.write(object, nil, eventtype, reason, messageFmt, args...)
}

// AnnotatedEventf is Eventf with the annotations appended.
func (f *FakeRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	f.write(object, annotations, eventtype, reason, messageFmt, args...)
}

// WithLogger returns f: the fake does not log.
func (f *FakeRecorder) WithLogger(logger klog.Logger) EventRecorderLogger { return f }
