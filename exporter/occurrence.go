package exporter

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API versions an [Occurrence] can come from.
const (
	// CoreV1 is the core/v1 Event API.
	CoreV1 = "v1"
	// EventsV1 is the events.k8s.io/v1 Event API.
	EventsV1 = "events.k8s.io/v1"
)

// Occurrence is one occurrence of a Kubernetes event, as the exporter hands
// it to every sink: an event the first time it is seen, and again each time
// a modification raises its count (core/v1 count, or series count). It is
// identified by the event's UID and that count ([Occurrence.Key]). Sinks
// must not modify it: the same value goes to every sink.
type Occurrence struct {
	// UID is the event object's UID.
	UID string `json:"uid"`
	// Count is the occurrence's count: 1 for a new event, then the count
	// (core/v1 count, or series count) that the modification raised it to.
	Count int32 `json:"count"`
	// APIVersion is the API the event was read through: [CoreV1] or
	// [EventsV1].
	APIVersion string `json:"apiVersion"`
	// Namespace and Name are the event object's.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ResourceVersion is the event object's resource version when the
	// occurrence was seen.
	ResourceVersion string `json:"resourceVersion"`
	// Type is Normal or Warning.
	Type string `json:"type"`
	// Reason is the event's reason.
	Reason string `json:"reason"`
	// Action is the event's action (events.k8s.io), if any.
	Action string `json:"action,omitempty"`
	// Message is the event's message (core/v1) or note (events.k8s.io).
	Message string `json:"message"`
	// ReportingController is the reporting controller, or for core/v1
	// events without one, the source component.
	ReportingController string `json:"reportingController"`
	// ReportingInstance is the reporting instance, or the source host.
	ReportingInstance string `json:"reportingInstance,omitempty"`
	// Regarding is the object the event is about (core/v1 involvedObject).
	Regarding ObjectRef `json:"regarding"`
	// Related is the secondary object, if any.
	Related *ObjectRef `json:"related,omitempty"`
	// FirstTime is when the event was first seen (firstTimestamp, or
	// eventTime).
	FirstTime time.Time `json:"firstTime"`
	// LastTime is when this occurrence happened (lastTimestamp, series
	// lastObservedTime, or eventTime; firstTimestamp if it has none of
	// them).
	LastTime time.Time `json:"lastTime"`

	// Seq is the occurrence's position in the exporter's order, from 1.
	Seq uint64 `json:"-"`
	// receivers is the set of receivers the routes selected, one bit per
	// receiver index.
	receivers uint64
	// listed is set on an occurrence read from a list rather than a
	// watch: its resource version does not order it, so it does not move
	// the checkpoint's resource version.
	listed  bool
	encOnce sync.Once
	enc     []byte
	// event is the core/v1 Event the occurrence was made from (for
	// events.k8s.io, its core/v1 equivalent), shared with the sinks and
	// never modified; nil for an occurrence built by a program.
	event *corev1.Event
	// object is the involved object's metadata once looked up (nil if
	// not looked up, or the lookup failed); resolve, set by the pipeline
	// when lookups are on, looks it up on first use (see
	// [Occurrence.involvedObject]).
	object  *ObjectMeta
	resolve func() *ObjectMeta
	// rec and theirRec are the record, with and without the fanout
	// object, encoded once for every sink.
	rec, theirRec recordCache
	// raise is set by the source on an occurrence of an event it
	// forwarded before (a count raise): receivers with
	// kubernetes-event-exporter's stream do not get it.
	raise bool
	// extra counts, by receiver bit, the matching rules beyond the first
	// that named a receiver with kubernetes-event-exporter's stream,
	// which gets the occurrence once per rule; nil if none.
	extra map[uint64]int
}

// JSON returns the occurrence encoded as one line of JSON (without the
// newline): the record of receivers with format fanout. It is encoded once
// and shared by every sink. Invalid UTF-8 in any
// string becomes U+FFFD. The caller must not modify it.
func (o *Occurrence) JSON() []byte {
	o.encOnce.Do(func() {
		b, err := json.Marshal(o)
		if err != nil { // not reachable: every field encodes
			b = []byte(`{"uid":` + strconv.Quote(o.UID) + `,"error":"unencodable"}`)
		}
		o.enc = b
	})
	return o.enc
}

// involvedObject returns the involved object's metadata, looking it up
// the first time if lookups are on; nil if they are off or it failed.
// Only the pipeline's goroutine calls it, before publishing.
func (o *Occurrence) involvedObject() *ObjectMeta {
	if r := o.resolve; r != nil {
		o.resolve = nil
		o.object = r()
	}
	return o.object
}

// ObjectRef identifies a Kubernetes object.
type ObjectRef struct {
	// Kind, Namespace, Name, UID and APIVersion identify the object.
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
	// FieldPath names a part of the object (a container), if any.
	FieldPath string `json:"fieldPath,omitempty"`
}

// Key identifies an occurrence: its UID and count, as "<uid>/<count>". The
// NATS sink uses it as the message ID, the webhook sink as the
// Idempotency-Key of a single-occurrence request.
func (o *Occurrence) Key() string { return Key(o.UID, o.Count) }

// Key returns the key of the occurrence of the event uid with count.
func Key(uid string, count int32) string {
	return uid + "/" + strconv.FormatInt(int64(count), 10)
}

// CoreCount returns the occurrence count of a core/v1 event: the series
// count when the event has a series (events written through events.k8s.io
// and read through core/v1), else its count, and at least 1.
func CoreCount(e *corev1.Event) int32 {
	n := e.Count
	if e.Series != nil && e.Series.Count > n {
		n = e.Series.Count
	}
	return max(n, 1)
}

// EventsCount returns the occurrence count of an events.k8s.io/v1 event:
// its series count when it has a series, else its deprecated count, and at
// least 1.
func EventsCount(e *eventsv1.Event) int32 {
	n := e.DeprecatedCount
	if e.Series != nil && e.Series.Count > n {
		n = e.Series.Count
	}
	return max(n, 1)
}

// FromCore returns the occurrence of a core/v1 event at its current count.
func FromCore(e *corev1.Event) *Occurrence {
	o := &Occurrence{
		UID: string(e.UID), Count: CoreCount(e), APIVersion: CoreV1,
		Namespace: e.Namespace, Name: e.Name, ResourceVersion: e.ResourceVersion,
		Type: e.Type, Reason: e.Reason, Action: e.Action, Message: e.Message,
		ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
		Regarding: coreRef(e.InvolvedObject),
		FirstTime: e.FirstTimestamp.Time, LastTime: e.LastTimestamp.Time,
		event: e,
	}
	if o.ReportingController == "" {
		o.ReportingController = e.Source.Component
	}
	if o.ReportingInstance == "" {
		o.ReportingInstance = e.Source.Host
	}
	if e.Related != nil {
		r := coreRef(*e.Related)
		o.Related = &r
	}
	if o.FirstTime.IsZero() {
		o.FirstTime = e.EventTime.Time
	}
	if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
		o.LastTime = e.Series.LastObservedTime.Time
	}
	if o.LastTime.IsZero() { // as kubernetes-event-exporter ages it: eventTime next
		o.LastTime = e.EventTime.Time
	}
	if o.LastTime.IsZero() {
		o.LastTime = o.FirstTime
	}
	return o
}

// FromEvents returns the occurrence of an events.k8s.io/v1 event at its
// current count.
func FromEvents(e *eventsv1.Event) *Occurrence {
	o := &Occurrence{
		UID: string(e.UID), Count: EventsCount(e), APIVersion: EventsV1,
		Namespace: e.Namespace, Name: e.Name, ResourceVersion: e.ResourceVersion,
		Type: e.Type, Reason: e.Reason, Action: e.Action, Message: e.Note,
		ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
		Regarding: coreRef(e.Regarding),
		FirstTime: e.EventTime.Time, LastTime: e.EventTime.Time,
		event: coreFromEvents(e),
	}
	if o.ReportingController == "" {
		o.ReportingController = e.DeprecatedSource.Component
	}
	if o.ReportingInstance == "" {
		o.ReportingInstance = e.DeprecatedSource.Host
	}
	if e.Related != nil {
		r := coreRef(*e.Related)
		o.Related = &r
	}
	if o.FirstTime.IsZero() {
		o.FirstTime = e.DeprecatedFirstTimestamp.Time
	}
	o.LastTime = o.FirstTime
	if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
		o.LastTime = e.Series.LastObservedTime.Time
	} else if !e.DeprecatedLastTimestamp.IsZero() {
		o.LastTime = e.DeprecatedLastTimestamp.Time
	}
	return o
}

func coreRef(r corev1.ObjectReference) ObjectRef {
	return ObjectRef{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: string(r.UID),
		APIVersion: r.APIVersion, FieldPath: r.FieldPath}
}

// coreFromEvents returns the core/v1 equivalent of an events.k8s.io/v1
// event, field for field.
func coreFromEvents(e *eventsv1.Event) *corev1.Event {
	c := &corev1.Event{
		TypeMeta: e.TypeMeta, ObjectMeta: e.ObjectMeta, InvolvedObject: e.Regarding, Reason: e.Reason, Message: e.Note,
		Source:         corev1.EventSource{Component: e.DeprecatedSource.Component, Host: e.DeprecatedSource.Host},
		FirstTimestamp: e.DeprecatedFirstTimestamp, LastTimestamp: e.DeprecatedLastTimestamp,
		Count: e.DeprecatedCount, Type: e.Type, EventTime: e.EventTime, Action: e.Action, Related: e.Related,
		ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
	}
	if c.TypeMeta.APIVersion != "" {
		c.TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: CoreV1}
	}
	if e.Series != nil {
		c.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return c
}
