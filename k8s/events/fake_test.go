package events

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientevents "k8s.io/client-go/tools/events"
)

type fakeCall struct {
	regarding, related runtime.Object
	annotations        map[string]string
	eventtype, reason  string
	action, note       string
	args               []interface{}
}

func fakeCalls() []fakeCall {
	typed := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	deploy := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"}}
	return []fakeCall{
		{pod("p", "ns"), nil, nil, corev1.EventTypeNormal, "Started", "Start", "plain", nil},
		{pod("p", "ns"), nil, nil, corev1.EventTypeWarning, "Failed", "Pull", "image %q: %d", []interface{}{"x", 3}},
		{typed, deploy, nil, corev1.EventTypeNormal, "Scaled", "Scale", "to %d", []interface{}{2}},
		{typed, nil, map[string]string{"b": "2", "a": "1"}, corev1.EventTypeNormal, "Annotated", "Note", "with annotations", nil},
		{nil, nil, nil, corev1.EventTypeNormal, "NoObject", "None", "nothing", nil},
		{typed, typed, map[string]string{}, "Weird%d", "Reason", "Act", "note %s", []interface{}{"n"}},
	}
}

// Our FakeRecorder writes client-go's strings, in both forms.
func TestFakeRecorderMatchesClientGo(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		ours := NewFakeRecorder(100)
		ours.Verbose = verbose
		theirs := clientevents.NewFakeRecorder(100)
		theirs.Verbose = verbose
		for _, c := range fakeCalls() {
			if c.annotations == nil {
				ours.Eventf(c.regarding, c.related, c.eventtype, c.reason, c.action, c.note, c.args...)
				theirs.Eventf(c.regarding, c.related, c.eventtype, c.reason, c.action, c.note, c.args...)
			} else {
				ours.AnnotatedEventf(c.regarding, c.related, c.annotations, c.eventtype, c.reason, c.action, c.note, c.args...)
				theirs.AnnotatedEventf(c.regarding, c.related, c.annotations, c.eventtype, c.reason, c.action, c.note, c.args...)
			}
		}
		require.Equal(t, len(theirs.Events), len(ours.Events))
		for range len(theirs.Events) {
			assert.Equal(t, <-theirs.Events, <-ours.Events, "verbose=%v", verbose)
		}
	}
}

func TestFakeRecorderFormats(t *testing.T) {
	f := NewFakeRecorder(10)
	typed := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}}
	deploy := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"}}
	f.Eventf(typed, deploy, corev1.EventTypeWarning, "Failed", "Pull", "image %q", "x")
	assert.Equal(t, `Warning Failed image "x"`, <-f.Events)
	f.Verbose = true
	f.AnnotatedEventf(typed, deploy, map[string]string{"k": "v"}, corev1.EventTypeWarning, "Failed", "Pull", "image %q", "x")
	assert.Equal(t, `Warning Failed Pull image "x" {kind=Pod,apiVersion=v1} {kind=Deployment,apiVersion=apps/v1} map[k:v]`, <-f.Events)
	var typedNil *corev1.Pod
	f.Eventf(typedNil, pod("p", "ns"), corev1.EventTypeNormal, "R", "A", "n")
	assert.Equal(t, "Normal R A n", <-f.Events, "no kind: no suffix; a typed nil does not panic")
}

// client-go's fake blocks when Events is full, hanging a test that reads
// less than it records; ours waits for a reader a while, then discards and
// counts.
func TestFakeRecorderNeverHangsATestThatReadsLess(t *testing.T) {
	f := NewFakeRecorder(2)
	for range 5 {
		f.Eventf(pod("p", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
	}
	assert.Len(t, f.Events, 2)
	assert.EqualValues(t, 3, f.Dropped())

	// Unbuffered, nobody reading: discarded (after a wait).
	u := &FakeRecorder{Events: make(chan string)}
	u.Eventf(nil, nil, corev1.EventTypeNormal, "R", "A", "n")
	assert.EqualValues(t, 1, u.Dropped())

	// Negative size: unbuffered.
	assert.Equal(t, 0, cap(NewFakeRecorder(-1).Events))
}

func TestFakeRecorderNilEvents(t *testing.T) {
	f := &FakeRecorder{}
	f.Eventf(pod("p", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
	f.AnnotatedEventf(pod("p", "ns"), nil, map[string]string{"a": "b"}, corev1.EventTypeNormal, "R", "A", "n")
	assert.Zero(t, f.Dropped())
	var nilRecorder *FakeRecorder
	nilRecorder.Eventf(nil, nil, "", "", "", "")
	assert.Zero(t, nilRecorder.Dropped())
}

func TestFakeRecorderLiteralAndLogger(t *testing.T) {
	ch := make(chan string, 1)
	f := &FakeRecorder{Events: ch}
	assert.Same(t, f, f.WithLogger(quiet))
	var r EventRecorderLogger = f
	r.Eventf(nil, nil, corev1.EventTypeNormal, "R", "A", "n %d", 1)
	assert.Equal(t, "Normal R n 1", <-ch)
}

func TestFakeRecorderConcurrent(t *testing.T) {
	f := NewFakeRecorder(50)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				f.Eventf(nil, nil, corev1.EventTypeNormal, "R", "A", "n")
			}
		})
	}
	wg.Wait()
	assert.Len(t, f.Events, 50)
	assert.EqualValues(t, 150, f.Dropped())
}

// A reader running behind the code under test gets every string, as with
// client-go's blocking fake: unbuffered, the reader arriving after the
// event; buffered, the reader taking them slower than they are recorded.
func TestFakeRecorderWaitsForAReaderBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, size := range []int{0, 1} {
			f := NewFakeRecorder(size)
			go func() {
				for i := range 5 {
					f.Eventf(pod("p", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n%d", i)
				}
			}()
			for i := range 5 {
				time.Sleep(100 * time.Millisecond)
				assert.Equal(t, fmt.Sprintf("Normal R n%d", i), <-f.Events, "size %d", size)
			}
			assert.Zero(t, f.Dropped(), "size %d", size)
		}
	})
}
