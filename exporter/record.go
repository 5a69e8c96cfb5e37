package exporter

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Record formats of a receiver (its format key).
const (
	// FormatEvent, the default, writes an [EnhancedEvent]: the Event as
	// kubernetes-event-exporter writes it, plus a "fanout" object.
	FormatEvent = "event"
	// FormatFanout writes the [Occurrence] itself (this exporter's
	// format before kubernetes-event-exporter's was the default).
	FormatFanout = "fanout"
)

// EnhancedEvent is the record payload sinks write by default, and the data
// of layout templates: kubernetes-event-exporter's record of the same name,
// field for field (the core/v1 Event, clusterName, and involvedObject with
// the looked-up metadata, see [Lookup]), plus Fanout. Events read through events.k8s.io/v1 are shown
// as their core/v1 equivalent.
type EnhancedEvent struct {
	corev1.Event `json:",inline"`
	// ClusterName is the configuration's clusterName.
	ClusterName string `json:"clusterName"`
	// InvolvedObject is the event's involved object.
	InvolvedObject EnhancedObjectReference `json:"involvedObject"`
	// Fanout identifies the occurrence ("fanout" in JSON; not in
	// kubernetes-event-exporter's records).
	Fanout *OccurrenceID `json:"fanout,omitempty"`
}

// EnhancedObjectReference is an involved object with its metadata, as in
// kubernetes-event-exporter's records. Labels, Annotations,
// OwnerReferences and Deleted come from the lookup of the object; they
// stay empty (and Deleted false) when lookups are off (omitLookup: true)
// or the lookup failed.
type EnhancedObjectReference struct {
	corev1.ObjectReference `json:",inline"`
	// Labels, Annotations and OwnerReferences are the object's.
	Labels          map[string]string       `json:"labels,omitempty"`
	Annotations     map[string]string       `json:"annotations,omitempty"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences,omitempty"`
	// Deleted reports that the object was gone when looked up.
	Deleted bool `json:"deleted"`
}

// OccurrenceID is the "fanout" object of a record: what identifies the
// occurrence, which the Event's own fields do not (an events.k8s.io
// series count is not the core/v1 count).
type OccurrenceID struct {
	// UID is the event's UID, Count the occurrence's count, Key
	// "<uid>/<count>" ([Occurrence.Key]).
	UID   string `json:"uid"`
	Count int32  `json:"count"`
	Key   string `json:"key"`
	// API is the API the event was read through ([CoreV1] or [EventsV1]).
	API string `json:"api"`
}

// record returns the record of a receiver with clusterName cluster:
// [Occurrence.Enhanced], without the fanout object for
// kubernetes-event-exporter's (theirs).
func (o *Occurrence) record(cluster string, theirs bool) *EnhancedEvent {
	e := o.Enhanced(cluster)
	if theirs {
		e.Fanout = nil
	}
	return e
}

// recordData is what a receiver's templates other than a layout's (headers,
// Opsgenie's and OpsCenter's keys) are executed against: the occurrence's
// record with clusterName cluster, without the fanout object when theirs
// (compat: kubernetes-event-exporter), as the receiver's records are.
type recordData struct {
	cluster string
	theirs  bool
}

// of returns o's record.
func (d recordData) of(o *Occurrence) *EnhancedEvent { return o.record(d.cluster, d.theirs) }

// Enhanced returns the occurrence's record with clusterName cluster.
func (o *Occurrence) Enhanced(cluster string) *EnhancedEvent {
	e := o.coreEvent()
	ref := EnhancedObjectReference{ObjectReference: e.InvolvedObject}
	if m := o.object; m != nil {
		ref.Labels, ref.Annotations, ref.OwnerReferences, ref.Deleted = m.Labels, m.Annotations, m.OwnerReferences, m.Deleted
	}
	return &EnhancedEvent{Event: *e, ClusterName: cluster, InvolvedObject: ref,
		Fanout: &OccurrenceID{UID: o.UID, Count: o.Count, Key: o.Key(), API: o.APIVersion}}
}

// coreEvent returns the core/v1 Event the occurrence was made from, or one
// made from its fields (an occurrence built by a program).
func (o *Occurrence) coreEvent() *corev1.Event {
	if o.event != nil {
		return o.event
	}
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: types.UID(o.UID),
			ResourceVersion: o.ResourceVersion},
		InvolvedObject: objectReference(o.Regarding), Reason: o.Reason, Message: o.Message, Type: o.Type,
		Count: o.Count, Action: o.Action, FirstTimestamp: metav1.NewTime(o.FirstTime),
		LastTimestamp:       metav1.NewTime(o.LastTime),
		ReportingController: o.ReportingController, ReportingInstance: o.ReportingInstance,
	}
	if o.Related != nil {
		r := objectReference(*o.Related)
		e.Related = &r
	}
	return e
}

func objectReference(r ObjectRef) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: types.UID(r.UID),
		APIVersion: r.APIVersion, FieldPath: r.FieldPath}
}

// EventJSON returns the occurrence's default record, its [EnhancedEvent]
// with clusterName cluster, as one line of JSON (no newline). The
// encoding is done once and shared by every sink with the same cluster
// name. The caller must not modify it.
func (o *Occurrence) EventJSON(cluster string) []byte { return o.rec.get(o, cluster, false) }

// theirEventJSON returns kubernetes-event-exporter's record: EventJSON
// without the fanout object, encoded once too.
func (o *Occurrence) theirEventJSON(cluster string) []byte { return o.theirRec.get(o, cluster, true) }

// recordCache holds an occurrence's record, encoded once for the first
// cluster name asked for.
type recordCache struct {
	once    sync.Once
	cluster string
	b       []byte
}

// get returns o's record with clusterName cluster, without the fanout
// object if theirs.
func (c *recordCache) get(o *Occurrence, cluster string, theirs bool) []byte {
	c.once.Do(func() { c.cluster, c.b = cluster, marshalRecord(o.record(cluster, theirs)) })
	if c.cluster != cluster {
		return marshalRecord(o.record(cluster, theirs))
	}
	return c.b
}

func marshalRecord(e *EnhancedEvent) []byte {
	b, err := json.Marshal(e)
	if err != nil { // not reachable: every field encodes
		return []byte(fmt.Sprintf(`{"metadata":{"uid":%q},"error":"unencodable"}`, e.UID))
	}
	return b
}

// GetTimestampMs returns the first timestamp (or the event time) in Unix
// milliseconds, as the kubernetes-event-exporter method of the same name
// that layouts call.
func (e *EnhancedEvent) GetTimestampMs() int64 { return e.firstTime().UnixMilli() }

// GetTimestampISO8601 returns the first timestamp (or the event time) as
// kubernetes-event-exporter's method of the same name formats it.
func (e *EnhancedEvent) GetTimestampISO8601() string {
	return e.firstTime().Format("2006-01-02T15:04:05.000Z")
}

func (e *EnhancedEvent) firstTime() time.Time {
	if t := e.FirstTimestamp.Time; !t.IsZero() {
		return t
	}
	return e.EventTime.Time
}

// ToJSON returns the record's JSON, for layouts that call it.
func (e *EnhancedEvent) ToJSON() []byte { return marshalRecord(e) }

// DeDot returns a copy whose label and annotation keys (the event's and
// the involved object's) have their dots replaced by underscores, as
// kubernetes-event-exporter's deDot option does.
func (e *EnhancedEvent) DeDot() EnhancedEvent {
	c := *e
	c.Labels, c.Annotations = dedot(e.Labels), dedot(e.Annotations)
	c.InvolvedObject.Labels, c.InvolvedObject.Annotations = dedot(e.InvolvedObject.Labels), dedot(e.InvolvedObject.Annotations)
	return c
}

func dedot(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.ReplaceAll(k, ".", "_")] = v
	}
	return out
}

// Encoder returns the record a payload sink (stdout, file, pipe, webhook,
// NATS) writes for an occurrence: one JSON value, without a newline. An
// error is [Permanent]: the occurrence is dropped, counted as rejected.
type Encoder func(o *Occurrence) ([]byte, error)

// EventEncoder returns the encoder of the default record, the
// [EnhancedEvent] with clusterName cluster ([Occurrence.EventJSON]).
func EventEncoder(cluster string) Encoder {
	return func(o *Occurrence) ([]byte, error) { return o.EventJSON(cluster), nil }
}

// theirEventEncoder returns the encoder of kubernetes-event-exporter's
// record (compat): the [EnhancedEvent] without the fanout object.
func theirEventEncoder(cluster string) Encoder {
	return func(o *Occurrence) ([]byte, error) { return o.theirEventJSON(cluster), nil }
}

// FanoutEncoder is the encoder of format fanout: [Occurrence.JSON].
func FanoutEncoder(o *Occurrence) ([]byte, error) { return o.JSON(), nil }

// orDefault returns e, or the default record's encoder if e is nil.
func (e Encoder) orDefault() Encoder {
	if e == nil {
		return EventEncoder("")
	}
	return e
}

// appendLines appends the record of each occurrence of batch and a
// newline to buf. It stops at the first occurrence that cannot be encoded
// and returns how many were appended, with a [Permanent] error.
func appendLines(buf []byte, batch []*Occurrence, enc Encoder) ([]byte, int, error) {
	for i, o := range batch {
		b, err := enc(o)
		if err != nil {
			return buf, i, Permanent(fmt.Errorf("occurrence %s: %w", o.Key(), err))
		}
		buf = append(append(buf, b...), '\n')
	}
	return buf, len(batch), nil
}
