package events_test

import (
	"reflect"
	"testing"

	clientevents "k8s.io/client-go/tools/events"

	"github.com/fanout-go/fanout/k8s/events"
	"github.com/fanout-go/fanout/k8s/internal/apitest"
)

// Every exported name of client-go's tools/events (functions, types and the
// methods of its exported types) exists here.
func TestEveryClientGoNameExists(t *testing.T) {
	apitest.SameNames(t, "k8s.io/client-go/tools/events", ".", []string{"EventRecorder", "EventRecorderLogger",
		"AnnotatedEventRecorder", "EventBroadcaster", "EventSink", "EventBroadcasterAdapter"})
}

// A program written against client-go's struct types compiles against
// ours: the same methods and, where client-go's fields are all exported,
// exactly its fields, so that an unkeyed literal such as
// FakeRecorder{ch, false} compiles.
func TestStructTypesHaveClientGoShape(t *testing.T) {
	for _, c := range []struct{ theirs, ours reflect.Type }{
		{reflect.TypeFor[clientevents.FakeRecorder](), reflect.TypeFor[events.FakeRecorder]()},
		{reflect.TypeFor[clientevents.EventSinkImpl](), reflect.TypeFor[events.EventSinkImpl]()},
	} {
		t.Run(c.theirs.Name(), func(t *testing.T) { apitest.SameShape(t, c.theirs, c.ours) })
	}
}
