package events_test

import (
	"testing"

	"github.com/fanout-go/fanout/k8s/internal/apitest"
)

// Every exported name of client-go's tools/events (functions, types and the
// methods of its exported types) exists here.
func TestEveryClientGoNameExists(t *testing.T) {
	apitest.SameNames(t, "k8s.io/client-go/tools/events", ".", []string{"EventRecorder", "EventRecorderLogger",
		"AnnotatedEventRecorder", "EventBroadcaster", "EventSink", "EventBroadcasterAdapter"})
}
