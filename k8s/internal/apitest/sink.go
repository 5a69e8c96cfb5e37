package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Call is one call a fake sink received.
type Call[E any] struct {
	// N is the call's index among the sink's calls, from 0.
	N int
	// Op is "create", "update" or "patch".
	Op string
	// Event is a deep copy of the event passed.
	Event E
	// Patch is the patch of a "patch" call.
	Patch string
	// At is when the call was recorded: when it started, after [Sink]'s
	// Delay (the fake clock inside a testing/synctest bubble).
	At time.Time
	// Err is the error the call returned, nil if it succeeded.
	Err error
}

// Sink is what the fake client-go sinks share, modelled after
// [github.com/fanout-go/fanout/fanouttest.Sink]: it records every call and
// fails, holds or panics on demand. A call runs in this order: Panic,
// Delay, then under the sink's lock Fail and the fake's store, and the call
// is recorded; then Hold. Set the hooks before the sink is used.
type Sink[E any] struct {
	// Panic, if set, makes the calls for which it returns true panic
	// instead (they are not recorded; N is not set yet).
	Panic func(c Call[E]) bool
	// Delay makes every call sleep this long first.
	Delay time.Duration
	// Fail, if set, decides each call's error; nil lets the fake store
	// the event. It runs under the sink's lock, so it may count calls
	// without one of its own; it may panic (the call is then not
	// recorded).
	Fail func(c Call[E]) error
	// Hold, if set, is called with each recorded call; when it returns a
	// channel, the call returns only once it can receive from it (a value
	// or a close), or once the call's context ends, failing with the
	// context's error (recorded). A sink without a context (core/v1)
	// waits for the channel.
	Hold func(c Call[E]) <-chan struct{}

	mu    sync.Mutex
	calls []Call[E]
}

// call runs one call: store, under the lock, gets the Fail verdict and
// returns what the call returns.
func (s *Sink[E]) call(ctx context.Context, c Call[E], store func(failed error) (E, error)) (E, error) {
	if s.Panic != nil && s.Panic(c) {
		panic("apitest: sink panics, as told")
	}
	if s.Delay > 0 {
		time.Sleep(s.Delay)
	}
	c, out, err := s.record(c, store)
	if s.Hold != nil {
		if ch := s.Hold(c); ch != nil {
			select {
			case <-ch:
			case <-ctx.Done():
				s.mu.Lock()
				s.calls[c.N].Err = ctx.Err()
				s.mu.Unlock()
				var zero E
				return zero, ctx.Err()
			}
		}
	}
	return out, err
}

// HoldAll sets Hold so that every call waits until it can receive from
// ch: close ch to release them all.
func (s *Sink[E]) HoldAll(ch <-chan struct{}) {
	s.Hold = func(Call[E]) <-chan struct{} { return ch }
}

// record numbers c, decides and stores it and appends it to the calls, all
// under the lock (released if Fail panics).
func (s *Sink[E]) record(c Call[E], store func(failed error) (E, error)) (Call[E], E, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.N, c.At = len(s.calls), time.Now()
	var failed error
	if s.Fail != nil {
		failed = s.Fail(c)
	}
	out, err := store(failed)
	c.Err = err
	s.calls = append(s.calls, c)
	return c, out, err
}

// Calls returns the calls received so far, in order.
func (s *Sink[E]) Calls() []Call[E] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call[E](nil), s.calls...)
}

// Ops returns the Op of every call so far, in order.
func (s *Sink[E]) Ops() []string {
	var ops []string
	for _, c := range s.Calls() {
		ops = append(ops, c.Op)
	}
	return ops
}

// CoreSink fakes client-go tools/record's EventSink (core/v1 events): a
// small API server that keeps what it stores by name with a new resource
// version, answers a patch of a name it does not hold with a 404, and
// applies a patch's count and message. Make it with [NewCoreSink].
type CoreSink struct {
	Sink[*corev1.Event]

	stored map[string]*corev1.Event // guarded by Sink.mu
	rv     int
}

// NewCoreSink returns an empty [CoreSink].
func NewCoreSink() *CoreSink { return &CoreSink{stored: map[string]*corev1.Event{}} }

// Create records a create and stores e.
func (s *CoreSink) Create(e *corev1.Event) (*corev1.Event, error) { return s.do("create", e, nil) }

// Update records an update and stores e.
func (s *CoreSink) Update(e *corev1.Event) (*corev1.Event, error) { return s.do("update", e, nil) }

// Patch records a patch and applies its count and message to the stored
// event of e's name.
func (s *CoreSink) Patch(e *corev1.Event, p []byte) (*corev1.Event, error) {
	return s.do("patch", e, p)
}

var coreGR = schema.GroupResource{Resource: "events"}

func (s *CoreSink) do(op string, e *corev1.Event, patch []byte) (*corev1.Event, error) {
	c := Call[*corev1.Event]{Op: op, Event: e.DeepCopy(), Patch: string(patch)}
	return s.call(context.Background(), c, func(failed error) (*corev1.Event, error) {
		if failed != nil {
			return nil, failed
		}
		st := e.DeepCopy()
		if op == "patch" {
			old := s.stored[e.Name]
			if old == nil {
				return nil, apierrors.NewNotFound(coreGR, e.Name)
			}
			var p struct {
				Count   int32  `json:"count"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(patch, &p); err != nil {
				return nil, err
			}
			st = old.DeepCopy()
			st.Count, st.Message = p.Count, p.Message
		}
		s.rv++
		st.ResourceVersion = fmt.Sprint(s.rv)
		s.stored[e.Name] = st
		return st.DeepCopy(), nil
	})
}

// Stored returns a copy of the event stored under name, nil if none.
func (s *CoreSink) Stored(name string) *corev1.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stored[name].DeepCopy()
}

// Forget drops every stored event, as an API server whose events expired.
func (s *CoreSink) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.stored)
}

// EventsSink fakes client-go tools/events' EventSink (events.k8s.io/v1):
// it stores nothing and answers each successful call with a copy of the
// event carrying a new resource version (every call, failed or not, takes
// one). Its zero value is ready to use.
type EventsSink struct {
	Sink[*eventsv1.Event]

	rv int // guarded by Sink.mu
}

// Create records a create.
func (s *EventsSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.do(ctx, "create", e, nil)
}

// Update records an update.
func (s *EventsSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.do(ctx, "update", e, nil)
}

// Patch records a patch.
func (s *EventsSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return s.do(ctx, "patch", e, data)
}

func (s *EventsSink) do(ctx context.Context, op string, e *eventsv1.Event, patch []byte) (*eventsv1.Event, error) {
	c := Call[*eventsv1.Event]{Op: op, Event: e.DeepCopy(), Patch: string(patch)}
	return s.call(ctx, c, func(failed error) (*eventsv1.Event, error) {
		s.rv++
		if failed != nil {
			return nil, failed
		}
		st := e.DeepCopy()
		st.ResourceVersion = fmt.Sprint(s.rv)
		return st, nil
	})
}
