package events

// The test harness of this package: loggers, objects, the fake sink read
// as op summaries, and a started broadcaster. helper_test.go tests
// helper.go.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fanout-go/fanout/k8s/internal/apitest"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// quiet is a logger that drops everything, for tests that provoke errors.
var quiet = logr.Discard()

// quietCtx returns a context whose klog logger drops everything.
func quietCtx(ctx context.Context) context.Context { return klog.NewContext(ctx, quiet) }

func pod(name, ns string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)}}
}

// op is this package's summary of one call of a recordingSink.
type op struct {
	At       time.Duration // since the sink was made
	Verb     string        // create, update, patch
	NS, Name string
	Count    int32  // series count, 0 without series
	Observed string // series last observed time, RFC 3339 micro
	Patch    string
	RV       string
	Note     string
	Err      string // the error the sink returned, if any
}

func (o op) String() string {
	return fmt.Sprintf("%v %s %s/%s count=%d observed=%s rv=%q patch=%s note=%q err=%q",
		o.At, o.Verb, o.NS, o.Name, o.Count, o.Observed, o.RV, o.Patch, o.Note, o.Err)
}

// sinkCall is one call the shared fake sink received.
type sinkCall = apitest.Call[*eventsv1.Event]

// recordingSink is the shared fake events.k8s.io sink
// ([apitest.EventsSink]: it records every call, can delay, fail, hold or
// panic) read through op summaries. fail and hang are its Fail and Hold
// hooks over summaries, read at each call: fail decides a call's error
// from its index (nil: success); a call for which hang is true blocks
// until its context ends.
type recordingSink struct {
	*apitest.EventsSink
	start time.Time
	fail  func(n int, o op) error
	hang  func(o op) bool
}

func newRecordingSink() *recordingSink {
	s := &recordingSink{EventsSink: &apitest.EventsSink{}, start: time.Now()}
	s.Fail = func(c sinkCall) error {
		if s.fail == nil {
			return nil
		}
		return s.fail(c.N, s.op(c))
	}
	s.Hold = func(c sinkCall) <-chan struct{} {
		if s.hang != nil && s.hang(s.op(c)) {
			return make(chan struct{}) // never ready: until the context ends
		}
		return nil
	}
	return s
}

func (s *recordingSink) op(c sinkCall) op {
	ev := c.Event
	o := op{At: c.At.Sub(s.start), Verb: c.Op, NS: ev.Namespace, Name: ev.Name, Patch: c.Patch, RV: ev.ResourceVersion, Note: ev.Note}
	if ev.Series != nil {
		o.Count = ev.Series.Count
		o.Observed = ev.Series.LastObservedTime.UTC().Format(metav1.RFC3339Micro)
	}
	if c.Err != nil {
		o.Err = c.Err.Error()
	}
	return o
}

// ops returns the summaries of the calls so far, in order.
func (s *recordingSink) ops() []op {
	calls := s.Calls()
	out := make([]op, len(calls))
	for i, c := range calls {
		out[i] = s.op(c)
	}
	return out
}

var eventsGR = schema.GroupResource{Group: "events.k8s.io", Resource: "events"}

func notFound(name string) error      { return apierrors.NewNotFound(eventsGR, name) }
func alreadyExists(name string) error { return apierrors.NewAlreadyExists(eventsGR, name) }

var errTransport = errors.New("connection refused")

// startQuiet makes a broadcaster on sink, starts recording with a quiet
// logger, and registers its shutdown. It must run in the bubble that uses
// it.
func startQuiet(t *testing.T, sink EventSink, opts ...Option) (*Broadcaster, EventRecorderLogger) {
	t.Helper()
	b, err := New(sink, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(quietCtx(context.Background()))
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		b.Shutdown()
	})
	return b, b.NewRecorder(testScheme(), "ctrl").WithLogger(quiet)
}

func flush(t *testing.T, b *Broadcaster) {
	t.Helper()
	if err := b.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

func badRequest() error { return apierrors.NewBadRequest("no") }
