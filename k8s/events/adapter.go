package events

import (
	"context"

	"github.com/fanout-go/fanout/k8s/record"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedv1core "k8s.io/client-go/kubernetes/typed/core/v1"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
)

// eventBroadcasterAdapter is the EventBroadcasterAdapter of
// NewEventBroadcasterAdapterWithContext.
type eventBroadcasterAdapter struct {
	coreClient          typedv1core.EventsGetter
	coreBroadcaster     record.EventBroadcaster
	eventsv1Client      typedeventsv1.EventsV1Interface
	eventsv1Broadcaster EventBroadcaster
}

// NewEventBroadcasterAdapter is [NewEventBroadcasterAdapterWithContext]
// with context.Background().
func NewEventBroadcasterAdapter(client clientset.Interface) EventBroadcasterAdapter {
	return NewEventBroadcasterAdapterWithContext(context.Background(), client)
}

// NewEventBroadcasterAdapterWithContext returns a broadcaster for both
// event APIs, for components migrating from core/v1 events to
// events.k8s.io/v1 ones. When the server serves events.k8s.io/v1 (asked
// once, now, through client's discovery), NewRecorder returns a recorder
// of this package's [Broadcaster]; otherwise it returns a recorder of the
// core/v1 broadcaster wrapped to take the events.k8s.io/v1 arguments. The
// core/v1 broadcaster, this module's
// [github.com/fanout-go/fanout/k8s/record] one, is always made, with ctx
// (cancelling ctx shuts it down; its logger is ctx's), for
// DeprecatedNewLegacyRecorder.
// StartRecordingToSink starts both; Shutdown shuts both down.
func NewEventBroadcasterAdapterWithContext(ctx context.Context, client clientset.Interface) EventBroadcasterAdapter {
	a := &eventBroadcasterAdapter{}
	if _, err := client.Discovery().ServerResourcesForGroupVersionWithContext(ctx, eventsv1.SchemeGroupVersion.String()); err == nil {
		a.eventsv1Client = client.EventsV1()
		a.eventsv1Broadcaster = NewBroadcaster(&EventSinkImpl{Interface: a.eventsv1Client})
	}
	// As client-go, the core/v1 broadcaster is made in any case: the legacy
	// recorder needs it, and it costs little until it is started.
	a.coreClient = client.CoreV1()
	a.coreBroadcaster = record.NewBroadcaster(record.WithContext(ctx))
	return a
}

// StartRecordingToSink starts writing the events of both broadcasters,
// until stopCh is closed for the events.k8s.io/v1 one.
func (a *eventBroadcasterAdapter) StartRecordingToSink(stopCh <-chan struct{}) {
	if a.eventsv1Broadcaster != nil && a.eventsv1Client != nil {
		a.eventsv1Broadcaster.StartRecordingToSink(stopCh)
	}
	if a.coreBroadcaster != nil && a.coreClient != nil {
		a.coreBroadcaster.StartRecordingToSink(&typedv1core.EventSinkImpl{Interface: a.coreClient.Events("")})
	}
}

// NewRecorder returns a recorder for the events API the server serves,
// reporting as name.
func (a *eventBroadcasterAdapter) NewRecorder(name string) EventRecorderLogger {
	if a.eventsv1Broadcaster != nil && a.eventsv1Client != nil {
		return a.eventsv1Broadcaster.NewRecorder(scheme.Scheme, name)
	}
	return record.NewEventRecorderAdapter(a.DeprecatedNewLegacyRecorder(name))
}

// DeprecatedNewLegacyRecorder returns a core/v1 recorder with source
// component name.
func (a *eventBroadcasterAdapter) DeprecatedNewLegacyRecorder(name string) record.EventRecorderLogger {
	return a.coreBroadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: name})
}

// Shutdown shuts both broadcasters down.
func (a *eventBroadcasterAdapter) Shutdown() {
	if a.coreBroadcaster != nil {
		a.coreBroadcaster.Shutdown()
	}
	if a.eventsv1Broadcaster != nil {
		a.eventsv1Broadcaster.Shutdown()
	}
}
