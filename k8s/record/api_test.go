package record_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clientrecord "k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/fanout-go/fanout/k8s/eventstats"
	"github.com/fanout-go/fanout/k8s/internal/apitest"
	"github.com/fanout-go/fanout/k8s/record"
)

// Compile-time: every constructor and method has client-go's signature, and
// the aliased types are client-go's own.
var (
	_ func(...record.BroadcasterOption) clientrecord.EventBroadcaster    = record.NewBroadcaster
	_ func(time.Duration) clientrecord.EventBroadcaster                  = record.NewBroadcasterForTests
	_ func(clientrecord.CorrelatorOptions) clientrecord.EventBroadcaster = record.NewBroadcasterWithCorrelatorOptions
	_ func(time.Duration) record.BroadcasterOption                       = record.WithSleepDuration
	_ func(clientrecord.CorrelatorOptions) record.BroadcasterOption      = record.WithCorrelatorOptions
	_ func(context.Context) record.BroadcasterOption                     = record.WithContext

	_ func(clock.PassiveClock) *record.EventCorrelator                                     = record.NewEventCorrelator
	_ func(clientrecord.CorrelatorOptions) *record.EventCorrelator                         = record.NewEventCorrelatorWithOptions
	_ func(*record.EventCorrelator, *v1.Event) (*clientrecord.EventCorrelateResult, error) = (*record.EventCorrelator).EventCorrelate
	_ func(*record.EventCorrelator, *v1.Event)                                             = (*record.EventCorrelator).UpdateState

	_ func(int, clientrecord.EventAggregatorKeyFunc, clientrecord.EventAggregatorMessageFunc, int, int, clock.PassiveClock) *record.EventAggregator = record.NewEventAggregator
	_ func(*record.EventAggregator, *v1.Event) (*v1.Event, string)                                                                                  = (*record.EventAggregator).EventAggregate
	_ func(int, int, float32, clock.PassiveClock, clientrecord.EventSpamKeyFunc) *record.EventSourceObjectSpamFilter                                = record.NewEventSourceObjectSpamFilter
	_ func(*record.EventSourceObjectSpamFilter, *v1.Event) bool                                                                                     = (*record.EventSourceObjectSpamFilter).Filter

	_ clientrecord.EventAggregatorKeyFunc     = record.EventAggregatorByReasonFunc
	_ clientrecord.EventAggregatorMessageFunc = record.EventAggregatorByReasonMessageFunc

	_ func(clientrecord.EventRecorderLogger) *record.EventRecorderAdapter = record.NewEventRecorderAdapter
	_ func(int) *record.FakeRecorder                                      = record.NewFakeRecorder
	_ clientrecord.EventRecorderLogger                                    = (*record.FakeRecorder)(nil)
	_ clientrecord.EventBroadcaster                                       = (*record.Broadcaster)(nil)
	_ eventstats.Source                                                   = (*record.Broadcaster)(nil)

	_ clientrecord.EventSink          = record.EventSink(nil)
	_ clientrecord.EventRecorder      = record.EventRecorder(nil)
	_ clientrecord.EventFilterFunc    = record.EventFilterFunc(nil)
	_ clientrecord.EventSpamKeyFunc   = record.EventSpamKeyFunc(nil)
	_ *clientrecord.CorrelatorOptions = (*record.CorrelatorOptions)(nil)
	_ func(*v1.Event) bool            = record.EventFilterFunc(nil)
)

// Every exported name of client-go's tools/record (functions, types and the
// methods of its exported types) exists here.
func TestEveryClientGoNameExists(t *testing.T) {
	apitest.SameNames(t, "k8s.io/client-go/tools/record", ".", []string{"EventSink", "EventRecorder",
		"EventRecorderLogger", "EventBroadcaster", "CorrelatorOptions", "EventCorrelateResult"})
}

// A program written against client-go's struct types compiles against
// ours: the same methods (those promoted from an embedded mutex included)
// and, for FakeRecorder, whose fields are all exported, exactly its fields,
// so that an unkeyed literal such as FakeRecorder{ch, true} compiles.
func TestStructTypesHaveClientGoShape(t *testing.T) {
	for _, c := range []struct{ theirs, ours reflect.Type }{
		{reflect.TypeFor[clientrecord.FakeRecorder](), reflect.TypeFor[record.FakeRecorder]()},
		{reflect.TypeFor[clientrecord.EventAggregator](), reflect.TypeFor[record.EventAggregator]()},
		{reflect.TypeFor[clientrecord.EventSourceObjectSpamFilter](), reflect.TypeFor[record.EventSourceObjectSpamFilter]()},
		{reflect.TypeFor[clientrecord.EventCorrelator](), reflect.TypeFor[record.EventCorrelator]()},
		{reflect.TypeFor[clientrecord.EventRecorderAdapter](), reflect.TypeFor[record.EventRecorderAdapter]()},
	} {
		t.Run(c.theirs.Name(), func(t *testing.T) { apitest.SameShape(t, c.theirs, c.ours) })
	}
}
