package record_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// sinkCall is one call a testSink saw.
type sinkCall struct {
	Op    string // "create", "update" or "patch"
	Event v1.Event
	Patch string
	At    time.Time
	Err   error
}

// testSink is an EventSink that keeps what it stores by name, answers a
// patch of an unknown name with a 404, and records every call. fail, if
// set, decides each call's error; block, if set, is received from before
// each call.
type testSink struct {
	mu     sync.Mutex
	calls  []sinkCall
	stored map[string]*v1.Event
	rv     int
	fail   func(op string, e *v1.Event) error
	block  chan struct{}
}

func newTestSink() *testSink { return &testSink{stored: map[string]*v1.Event{}} }

func (s *testSink) call(op string, e *v1.Event, patch []byte) (*v1.Event, error) {
	if s.block != nil {
		<-s.block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := sinkCall{Op: op, Event: *e, Patch: string(patch), At: time.Now()}
	if s.fail != nil {
		c.Err = s.fail(op, e)
	}
	if c.Err == nil && op == "patch" && s.stored[e.Name] == nil {
		c.Err = apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, e.Name)
	}
	s.calls = append(s.calls, c)
	if c.Err != nil {
		return nil, c.Err
	}
	s.rv++
	switch op {
	case "create", "update":
		st := *e
		st.ResourceVersion = fmt.Sprint(s.rv)
		s.stored[e.Name] = &st
		out := st
		return &out, nil
	default:
		st := *s.stored[e.Name]
		var p struct {
			Count         int32  `json:"count"`
			Message       string `json:"message"`
			LastTimestamp string `json:"lastTimestamp"`
		}
		if err := json.Unmarshal(patch, &p); err != nil {
			return nil, err
		}
		st.Count, st.Message = p.Count, p.Message
		st.ResourceVersion = fmt.Sprint(s.rv)
		s.stored[e.Name] = &st
		out := st
		return &out, nil
	}
}

func (s *testSink) Create(e *v1.Event) (*v1.Event, error) { return s.call("create", e, nil) }
func (s *testSink) Update(e *v1.Event) (*v1.Event, error) { return s.call("update", e, nil) }
func (s *testSink) Patch(e *v1.Event, p []byte) (*v1.Event, error) {
	return s.call("patch", e, p)
}

func (s *testSink) Calls() []sinkCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sinkCall(nil), s.calls...)
}

func (s *testSink) ops() []string {
	var ops []string
	for _, c := range s.Calls() {
		ops = append(ops, c.Op)
	}
	return ops
}
