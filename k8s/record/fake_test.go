package record_test

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientrecord "k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/fanout-go/fanout/k8s/record"
)

// The strings are client-go's, checked against client-go's FakeRecorder.
func TestFakeRecorderFormatsLikeClientGo(t *testing.T) {
	obj := &v1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}}
	for _, include := range []bool{false, true} {
		ours, theirs := record.NewFakeRecorder(10), clientrecord.NewFakeRecorder(10)
		ours.IncludeObject, theirs.IncludeObject = include, include
		for _, r := range []clientrecord.EventRecorderLogger{ours, theirs} {
			r.Event(obj, v1.EventTypeNormal, "Started", "100% done")
			r.Eventf(obj, v1.EventTypeWarning, "Failed", "exit %d", 3)
			r.AnnotatedEventf(obj, map[string]string{"k": "v"}, v1.EventTypeNormal, "A", "n=%s", "x")
			r.WithLogger(klog.Background()).Event(obj, v1.EventTypeNormal, "L", "via logger")
		}
		for range 4 {
			assert.Equal(t, <-theirs.Events, <-ours.Events)
		}
	}
}

// client-go's FakeRecorder blocks when its buffer is full, hanging a test
// that reads less than it records; ours waits for a reader a while, then
// discards and counts.
func TestFakeRecorderNeverHangsATestThatReadsLess(t *testing.T) {
	f := record.NewFakeRecorder(2)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				f.Event(nil, v1.EventTypeNormal, "R", "m")
			}
		})
	}
	wg.Wait()
	assert.Len(t, f.Events, 2)
	assert.Equal(t, uint64(18), f.Dropped())

	// A literal without a channel discards; IncludeObject with a nil
	// object does not panic (client-go's does).
	(&record.FakeRecorder{IncludeObject: true}).Event(nil, v1.EventTypeNormal, "R", "m")
	lit := &record.FakeRecorder{Events: make(chan string, 1), IncludeObject: true}
	lit.Event(nil, v1.EventTypeNormal, "R", "m")
	assert.Equal(t, "Normal R m", <-lit.Events)
	assert.Zero(t, record.NewFakeRecorder(-1).Dropped(), "a negative size is 0, not a panic")
}

func TestEventRecorderAdapter(t *testing.T) {
	f := record.NewFakeRecorder(4)
	a := record.NewEventRecorderAdapter(f)
	a.Eventf(pod("web"), pod("other"), v1.EventTypeNormal, "Scheduled", "Binding", "to %s", "n1")
	a.AnnotatedEventf(pod("web"), nil, map[string]string{"a": "b"}, v1.EventTypeWarning, "R", "Act", "note")
	a.WithLogger(klog.Background()).Eventf(pod("web"), nil, v1.EventTypeNormal, "L", "Act", "logger")
	assert.Equal(t, "Normal Scheduled to n1", <-f.Events)
	assert.Equal(t, "Warning R note map[a:b]", <-f.Events)
	assert.Equal(t, "Normal L logger", <-f.Events)
	record.NewEventRecorderAdapter(nil).Eventf(pod("web"), nil, v1.EventTypeNormal, "R", "A", "nil recorder: no panic")
}

// kindless is a runtime.Object whose GetObjectKind returns nil.
type kindless struct{}

func (kindless) GetObjectKind() schema.ObjectKind  { return nil }
func (kindless) DeepCopyObject() k8sruntime.Object { return kindless{} }

// FakeRecorder with IncludeObject describes a typed nil object or one
// without an ObjectKind instead of panicking: the fake is what tests pass
// odd objects to.
func TestFakeRecorderIncludeObjectAcceptsOddObjects(t *testing.T) {
	f := record.NewFakeRecorder(10)
	f.IncludeObject = true
	var nilPod *v1.Pod
	assert.Nil(t, panicValue(func() { f.Event(nilPod, v1.EventTypeNormal, "R", "typed nil") }), "typed nil object")
	assert.Nil(t, panicValue(func() { f.Event(kindless{}, v1.EventTypeNormal, "R", "no kind") }), "nil ObjectKind")
}

// A reader running behind the code under test gets every event, as with
// client-go's blocking fake: unbuffered, the reader arriving after the
// event; buffered, the reader taking them slower than they are recorded.
func TestFakeRecorderWaitsForAReaderBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, size := range []int{0, 1} {
			f := record.NewFakeRecorder(size)
			go func() {
				for i := range 5 {
					f.Eventf(nil, v1.EventTypeNormal, "R", "m%d", i)
				}
			}()
			for i := range 5 {
				time.Sleep(100 * time.Millisecond)
				assert.Equal(t, fmt.Sprintf("Normal R m%d", i), <-f.Events, "size %d", size)
			}
			assert.Zero(t, f.Dropped(), "size %d", size)
		}
	})
}
