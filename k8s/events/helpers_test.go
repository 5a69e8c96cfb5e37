package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

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

// op is one sink call as a recordingSink saw it.
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

// recordingSink is an EventSink that records every call. fail, if set,
// decides an error for a call (nil: success); n is the call's index. A
// call for which hang, if set, is true blocks until its context ends.
type recordingSink struct {
	start time.Time
	fail  func(n int, o op) error
	hang  func(o op) bool
	delay time.Duration // each call sleeps this long first

	mu  sync.Mutex
	ops []op
	rv  int
}

func newRecordingSink() *recordingSink { return &recordingSink{start: time.Now()} }

func (s *recordingSink) call(ctx context.Context, verb string, ev *eventsv1.Event, patch []byte) (*eventsv1.Event, error) {
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	o := op{At: time.Since(s.start), Verb: verb, NS: ev.Namespace, Name: ev.Name, Patch: string(patch), RV: ev.ResourceVersion, Note: ev.Note}
	if ev.Series != nil {
		o.Count = ev.Series.Count
		o.Observed = ev.Series.LastObservedTime.UTC().Format(metav1.RFC3339Micro)
	}
	s.mu.Lock()
	n := len(s.ops)
	var err error
	if s.fail != nil {
		err = s.fail(n, o)
	}
	if err != nil {
		o.Err = err.Error()
	}
	s.ops = append(s.ops, o)
	s.rv++
	rv := s.rv
	s.mu.Unlock()
	if s.hang != nil && s.hang(o) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	stored := ev.DeepCopy()
	stored.ResourceVersion = fmt.Sprint(rv)
	return stored, nil
}

func (s *recordingSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return s.call(ctx, "create", ev, nil)
}

func (s *recordingSink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return s.call(ctx, "update", ev, nil)
}

func (s *recordingSink) Patch(ctx context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return s.call(ctx, "patch", ev, data)
}

func (s *recordingSink) Ops() []op {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]op(nil), s.ops...)
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
