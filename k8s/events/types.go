package events

import (
	clientevents "k8s.io/client-go/tools/events"
)

// The interfaces other code passes around are client-go's own (type
// aliases), so that recorders and broadcasters flow unchanged between this
// package, client-go, controller-runtime and any library that takes
// client-go's types.

// EventRecorder records events.k8s.io/v1 events on behalf of a reporting
// controller. It is client-go's [clientevents.EventRecorder].
type EventRecorder = clientevents.EventRecorder

// EventRecorderLogger is an [EventRecorder] whose logger can be replaced
// for contextual logging. It is client-go's
// [clientevents.EventRecorderLogger].
type EventRecorderLogger = clientevents.EventRecorderLogger

// AnnotatedEventRecorder is the optional extension of [EventRecorder] that
// attaches annotations to an event. It is client-go's
// [clientevents.AnnotatedEventRecorder]; the recorders of this package and
// [FakeRecorder] implement it.
type AnnotatedEventRecorder = clientevents.AnnotatedEventRecorder

// EventBroadcaster receives events from recorders and sends them to a
// sink, watchers and loggers. It is client-go's
// [clientevents.EventBroadcaster]; [NewBroadcaster] returns a
// [*Broadcaster], which adds Flush, Stats and a bounded shutdown.
type EventBroadcaster = clientevents.EventBroadcaster

// EventSink stores events; [EventSinkImpl] implements it with a typed
// client. It must respect the namespace of the event it is given and
// return the errors client-go's REST client returns, which decide whether
// a write is retried. It is client-go's [clientevents.EventSink].
type EventSink = clientevents.EventSink

// EventBroadcasterAdapter chooses between the events.k8s.io/v1 and the
// core/v1 event APIs, for components migrating from one to the other (see
// [NewEventBroadcasterAdapterWithContext]). It is client-go's
// [clientevents.EventBroadcasterAdapter].
//
// Deprecated: client-go will remove it once the migration is complete.
//
//lint:ignore SA1019 mirrors client-go's deprecated name; removed when client-go removes it
type EventBroadcasterAdapter = clientevents.EventBroadcasterAdapter
