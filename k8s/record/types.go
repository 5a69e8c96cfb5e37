package record

import (
	"k8s.io/client-go/tools/record"
)

// The types other code passes around are client-go's own, so that values
// flow between this package, client-go and controller-runtime unchanged.

// EventSink knows how to store events; client-go's
// typed/core/v1.EventSinkImpl implements it. It is client-go's
// [record.EventSink].
type EventSink = record.EventSink

// EventRecorder records events on behalf of an event source. It is
// client-go's [record.EventRecorder].
type EventRecorder = record.EventRecorder

// EventRecorderLogger is an [EventRecorder] whose logger can be replaced
// for contextual logging. It is client-go's [record.EventRecorderLogger].
type EventRecorderLogger = record.EventRecorderLogger

// EventBroadcaster receives events from recorders and sends them to sinks,
// watchers and logs. It is client-go's [record.EventBroadcaster];
// [NewBroadcaster] returns a [*Broadcaster], which adds Flush, Stats and a
// bounded shutdown.
type EventBroadcaster = record.EventBroadcaster

// CorrelatorOptions tunes the aggregation, deduplication and spam filter of
// each sink; a zero field means client-go's default. It is client-go's
// [record.CorrelatorOptions].
type CorrelatorOptions = record.CorrelatorOptions

// EventCorrelateResult is what [EventCorrelator.EventCorrelate] decided
// for one event. It is client-go's [record.EventCorrelateResult].
type EventCorrelateResult = record.EventCorrelateResult

// EventAggregatorKeyFunc returns the key of an event's aggregation group
// and its key within the group. It is client-go's
// [record.EventAggregatorKeyFunc].
type EventAggregatorKeyFunc = record.EventAggregatorKeyFunc

// EventAggregatorMessageFunc returns the message of a combined event. It is
// client-go's [record.EventAggregatorMessageFunc].
type EventAggregatorMessageFunc = record.EventAggregatorMessageFunc

// EventSpamKeyFunc returns the key an event's spam budget is kept under. It
// is client-go's [record.EventSpamKeyFunc].
type EventSpamKeyFunc = record.EventSpamKeyFunc

// EventFilterFunc reports whether an event should be skipped. It is
// client-go's [record.EventFilterFunc].
type EventFilterFunc = record.EventFilterFunc
