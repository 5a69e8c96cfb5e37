package record

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// replySink stores nothing and replies with what reply makes of each event
// it is sent.
type replySink struct{ reply func(*v1.Event) *v1.Event }

func (s replySink) Create(e *v1.Event) (*v1.Event, error)          { return s.reply(e), nil }
func (s replySink) Update(e *v1.Event) (*v1.Event, error)          { return s.reply(e), nil }
func (s replySink) Patch(e *v1.Event, _ []byte) (*v1.Event, error) { return s.reply(e), nil }

// What a write stored is remembered under the eventKey of the event the
// sink replied with, as client-go's correlator learns it: the key built
// for the event sent serves only when the reply agrees with it on every
// field of the key.
func TestSinkAdapterRemembersWhatWasStoredUnderItsOwnKey(t *testing.T) {
	sent := func() *v1.Event {
		return &v1.Event{InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p"},
			Reason: "Synced", Message: "synced", Type: v1.EventTypeNormal, Count: 2}
	}
	for _, tc := range []struct {
		name    string
		reply   func(*v1.Event) *v1.Event
		wantKey func(sent, stored *v1.Event) string
	}{
		{"same fields", func(e *v1.Event) *v1.Event { c := *e; c.ResourceVersion = "7"; return &c },
			func(sent, _ *v1.Event) string { return eventKey(sent) }},
		{"the server rewrote the message", func(e *v1.Event) *v1.Event {
			c := *e
			c.ResourceVersion, c.Message = "7", "synced (normalized)"
			return &c
		}, func(_, stored *v1.Event) string { return eventKey(stored) }},
		{"no reply", func(*v1.Event) *v1.Event { return nil },
			func(sent, _ *v1.Event) string { return eventKey(sent) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, write := range []string{"create", "patch"} {
				var stored *v1.Event
				s := newSinkAdapter(replySink{func(e *v1.Event) *v1.Event { stored = tc.reply(e); return stored }}, klog.Background(), 10)
				e := sent()
				var err error
				if write == "create" {
					_, err = s.Create(context.Background(), e)
				} else {
					_, err = s.Update(context.Background(), e)
				}
				if err != nil {
					t.Fatal(err)
				}
				if stored == nil {
					stored = e
				}
				keys := s.stored.Keys()
				if want := tc.wantKey(sent(), stored); len(keys) != 1 || keys[0] != want {
					t.Errorf("%s: remembered under %q, want %q", write, keys, want)
				}
			}
		})
	}
}
