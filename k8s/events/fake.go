package events

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/fanout-go/fanout/internal/guard"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
)

// FakeRecorder is a recorder for tests: each event becomes a string on
// Events, in client-go's formats:
//
//	"<type> <reason> <note>"                                         Verbose false
//	"<type> <reason> <action> <note>[ {kind=K,apiVersion=V}]x2[ map[...]]"  Verbose true
//
// where the verbose form adds the kind and API version of regarding and of
// related (each only when its object carries them) and the annotations
// (when there are any). Note: in the short form the type and reason are
// part of the format string, as in client-go.
//
// Unlike client-go's, it never blocks for long: when Events is full (or
// unbuffered with no reader waiting) it waits up to [FakeRecorderWait] for
// room, so that a test reading behind the code under test, as with
// client-go, gets every string; then the string is discarded and counted
// ([FakeRecorder.Dropped]), so that a test that records more than it reads
// fails on its assertions instead of hanging. Once a wait has run out, the
// next strings do not wait, until one is taken again. With a nil Events
// every event is discarded (not counted), as in client-go. It is safe for
// concurrent use and usable as a literal &FakeRecorder{Events: ch}.
type FakeRecorder struct {
	Events  chan string
	Verbose bool
}

var (
	_ EventRecorderLogger    = (*FakeRecorder)(nil)
	_ AnnotatedEventRecorder = (*FakeRecorder)(nil)
)

// NewFakeRecorder returns a FakeRecorder whose Events holds bufferSize
// strings (a negative size means 0).
func NewFakeRecorder(bufferSize int) *FakeRecorder {
	return &FakeRecorder{Events: make(chan string, max(bufferSize, 0))}
}

// Eventf writes the event's string to Events.
func (f *FakeRecorder) Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	f.write(regarding, related, nil, eventtype, reason, action, note, args)
}

// AnnotatedEventf is Eventf with annotations, shown in the verbose form.
func (f *FakeRecorder) AnnotatedEventf(regarding runtime.Object, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...interface{}) {
	f.write(regarding, related, annotations, eventtype, reason, action, note, args)
}

// WithLogger returns f: a FakeRecorder does not log.
func (f *FakeRecorder) WithLogger(klog.Logger) EventRecorderLogger {
	return f
}

// FakeRecorderWait is how long a [FakeRecorder] waits for room in a full
// Events before it discards the event.
const FakeRecorderWait = time.Second

// fakeDrops holds [FakeRecorder.Dropped]: the struct keeps client-go's
// fields only.
var fakeDrops adapt.FakeDrops[FakeRecorder]

// Dropped returns the number of strings discarded because Events was full.
func (f *FakeRecorder) Dropped() uint64 {
	if f == nil {
		return 0
	}
	return fakeDrops.Get(f)
}

func (f *FakeRecorder) write(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args []interface{}) {
	if f == nil || f.Events == nil {
		return
	}
	var msg string
	if f.Verbose {
		msg = eventtype + " " + reason + " " + action + " " + fmt.Sprintf(note, args...) +
			kindSuffix(regarding) + kindSuffix(related) + annotationSuffix(annotations)
	} else {
		msg = fmt.Sprintf(eventtype+" "+reason+" "+note, args...)
	}
	fakeDrops.Send(f, f.Events, msg, FakeRecorderWait)
}

// kindSuffix is " {kind=K,apiVersion=V}" for an object that carries its
// kind, else "" (also for nil and for objects whose methods panic).
func kindSuffix(obj runtime.Object) string {
	if obj == nil {
		return ""
	}
	var gvk schema.GroupVersionKind
	if guard.Call(func() { gvk = obj.GetObjectKind().GroupVersionKind() }) != nil {
		return ""
	}
	if gvk.Empty() {
		return ""
	}
	return fmt.Sprintf(" {kind=%s,apiVersion=%s}", gvk.Kind, gvk.GroupVersion())
}

func annotationSuffix(annotations map[string]string) string {
	if len(annotations) == 0 {
		return ""
	}
	return " " + fmt.Sprint(annotations)
}
