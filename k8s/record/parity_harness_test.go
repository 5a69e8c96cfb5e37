package record_test

// Differential tests against client-go's k8s.io/client-go/tools/record:
// client-go's EventCorrelator, EventAggregator and
// EventSourceObjectSpamFilter and ours are given the same inputs on one fake
// clock, and every result is compared: Skip, the whole event
// (equality.Semantic), the patch bytes and the error.
//
// Files: parity_harness_test.go (this: the pair and the comparison),
// parity_scenario_test.go (client-go's own scenarios, server state),
// parity_random_test.go (random sequences, strict and tolerant),
// parity_options_test.go (custom CorrelatorOptions), parity_stages_test.go
// (the standalone aggregator and spam filter), parity_defaults_test.go
// (defaults) and parity_known_test.go (edge cases where we knowingly differ).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fanout-go/fanout/k8s/record"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientrecord "k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// client-go's defaults (tools/record/events_cache.go), unexported there.
const (
	parityDefaultCacheSize           = 4096
	parityDefaultMaxEvents           = 10
	parityDefaultIntervalSec         = 600
	parityDefaultBurst               = 25
	parityDefaultQPS         float32 = 1. / 300.
)

// parityStart is the fake clock's start: not a whole second, so that
// timestamps that lose their fraction (JSON) are told apart.
var parityStart = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)

// parityClientSpamKey is client-go's unexported getSpamKey, restated: the
// source, the involved object without its field path, and the type.
func parityClientSpamKey(e *v1.Event) string {
	return strings.Join([]string{
		e.Source.Component, e.Source.Host,
		e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name,
		string(e.InvolvedObject.UID), e.InvolvedObject.APIVersion,
		e.Type,
	}, "")
}

// parityPair runs client-go's EventCorrelator and ours side by side on one
// fake clock, which only the test moves.
type parityPair struct {
	clock  *clocktesting.FakePassiveClock
	client *clientrecord.EventCorrelator
	ours   *record.EventCorrelator

	// probed: each side's MessageFunc is wrapped by a probe that records
	// that the side built a combined event (both call MessageFunc exactly
	// then), which shows the aggregation decision even when the spam
	// filter then skips. The probe returns what the configured function
	// (or the side's own default) returns.
	probed                           bool
	clientAggregated, oursAggregated bool
}

// parityNewPair returns a pair built with NewEventCorrelatorWithOptions(opts)
// on each side; see parityNewSplitPair.
func parityNewPair(start time.Time, opts record.CorrelatorOptions) *parityPair {
	return parityNewSplitPair(start, opts, opts)
}

// parityNewSplitPair returns a pair built with
// NewEventCorrelatorWithOptions(clientOpts) for client-go and
// NewEventCorrelatorWithOptions(oursOpts) for ours. Each Clock is replaced
// by the pair's clock, and each MessageFunc is wrapped by the side's probe;
// a nil MessageFunc means the side's own default (client-go's for
// client-go, ours for ours).
func parityNewSplitPair(start time.Time, clientOpts, oursOpts record.CorrelatorOptions) *parityPair {
	p := &parityPair{clock: clocktesting.NewFakePassiveClock(start), probed: true}
	clientMsg, oursMsg := clientOpts.MessageFunc, oursOpts.MessageFunc
	if clientMsg == nil {
		clientMsg = clientrecord.EventAggregatorByReasonMessageFunc
	}
	if oursMsg == nil {
		oursMsg = record.EventAggregatorByReasonMessageFunc
	}
	clientOpts.Clock, oursOpts.Clock = p.clock, p.clock
	clientOpts.MessageFunc = func(e *v1.Event) string { p.clientAggregated = true; return clientMsg(e) }
	oursOpts.MessageFunc = func(e *v1.Event) string { p.oursAggregated = true; return oursMsg(e) }
	p.client = clientrecord.NewEventCorrelatorWithOptions(clientOpts)
	p.ours = record.NewEventCorrelatorWithOptions(oursOpts)
	return p
}

// parityNewPlainPair returns a pair built with NewEventCorrelator(clock) on
// each side: no options, no probes.
func parityNewPlainPair(start time.Time) *parityPair {
	p := &parityPair{clock: clocktesting.NewFakePassiveClock(start)}
	p.client = clientrecord.NewEventCorrelator(p.clock)
	p.ours = record.NewEventCorrelator(p.clock)
	return p
}

func (p *parityPair) advance(d time.Duration) { p.clock.SetTime(p.clock.Now().Add(d)) }

// parityOutcome is what both correlators returned for one event.
type parityOutcome struct {
	clientIn, oursIn   *v1.Event // the events given
	client, ours       *clientrecord.EventCorrelateResult
	clientErr, oursErr error

	probed                           bool
	clientAggregated, oursAggregated bool
}

// correlate gives each correlator its own copy of e, as recordToSink gives
// each its own event.
func (p *parityPair) correlate(e v1.Event) parityOutcome {
	o := parityOutcome{probed: p.probed}
	ce, oe := e, e
	o.clientIn, o.oursIn = &ce, &oe
	p.clientAggregated, p.oursAggregated = false, false
	o.client, o.clientErr = p.client.EventCorrelate(&ce)
	o.ours, o.oursErr = p.ours.EventCorrelate(&oe)
	o.clientAggregated, o.oursAggregated = p.clientAggregated, p.oursAggregated
	return o
}

// skipped reports whether client-go skipped the event (or returned none).
func (o parityOutcome) skipped() bool { return o.client == nil || o.client.Skip }

// diff lists every difference between the two results; empty means parity.
func (o parityOutcome) diff() []string {
	var d []string
	add := func(field string, client, ours any) {
		d = append(d, fmt.Sprintf("%s: client-go %v, ours %v", field, client, ours))
	}
	if !parityErrEqual(o.clientErr, o.oursErr) {
		add("error", o.clientErr, o.oursErr)
	}
	if o.probed && o.clientAggregated != o.oursAggregated {
		add("aggregated (MessageFunc called)", o.clientAggregated, o.oursAggregated)
	}
	if (o.client == nil) != (o.ours == nil) {
		add("result", o.client, o.ours)
		return d
	}
	if o.client == nil {
		return d
	}
	if o.client.Skip != o.ours.Skip {
		add("skip", o.client.Skip, o.ours.Skip)
		return d
	}
	d = append(d, parityEventDiff(o.client.Event, o.ours.Event)...)
	if !bytes.Equal(o.client.Patch, o.ours.Patch) || (o.client.Patch == nil) != (o.ours.Patch == nil) {
		add("patch", parityPatchString(o.client.Patch), parityPatchString(o.ours.Patch))
	}
	if c, u := o.client.Event != nil && o.client.Event == o.clientIn, o.ours.Event != nil && o.ours.Event == o.oursIn; c != u {
		add("result event is the input pointer", c, u)
	}
	return d
}

func parityErrEqual(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

func parityPatchString(p []byte) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", p)
}

// parityEventDiff compares two events with equality.Semantic (timestamps at
// full precision) and, when they differ, names every differing field:
// each field of the event, with ObjectMeta's fields one by one.
func parityEventDiff(c, u *v1.Event) []string {
	if c == nil || u == nil {
		if c == nil && u == nil {
			return nil
		}
		return []string{fmt.Sprintf("event: client-go %s, ours %s", parityDescribe(c), parityDescribe(u))}
	}
	if equality.Semantic.DeepEqual(c, u) {
		return nil
	}
	var d []string
	var walk func(prefix string, a, b reflect.Value)
	walk = func(prefix string, a, b reflect.Value) {
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			fa, fb := a.Field(i), b.Field(i)
			if f.Type == reflect.TypeFor[metav1.ObjectMeta]() || f.Type == reflect.TypeFor[metav1.TypeMeta]() {
				walk(prefix+f.Name+".", fa, fb)
				continue
			}
			if !equality.Semantic.DeepEqual(fa.Interface(), fb.Interface()) {
				d = append(d, fmt.Sprintf("%s%s: client-go %+v, ours %+v", prefix, f.Name, fa.Interface(), fb.Interface()))
			}
		}
	}
	walk("", reflect.ValueOf(c).Elem(), reflect.ValueOf(u).Elem())
	if len(d) == 0 { // cannot happen, but never report a difference without detail
		d = append(d, fmt.Sprintf("event: client-go %+v, ours %+v", *c, *u))
	}
	return d
}

// written simulates a successful write by recordToSink: the server returns
// the event with a new resource version (JSON round trip, so timestamps
// keep whole seconds, as an API server stores them), and each correlator is
// given the server's copy of its own result (UpdateState).
func (p *parityPair) written(o parityOutcome, resourceVersion string) {
	p.client.UpdateState(parityServerCopy(o.client.Event, resourceVersion))
	p.ours.UpdateState(parityServerCopy(o.ours.Event, resourceVersion))
}

func parityServerCopy(e *v1.Event, resourceVersion string) *v1.Event {
	c := *e
	c.ResourceVersion = resourceVersion
	data, err := json.Marshal(&c)
	if err != nil {
		panic(err)
	}
	var s v1.Event
	if err := json.Unmarshal(data, &s); err != nil {
		panic(err)
	}
	return &s
}

// parityNewEvent builds an event as client-go's recorder does
// (generateEvent): a name from the object and the time, count 1, both
// timestamps now.
func parityNewEvent(now time.Time, obj v1.ObjectReference, eventType, reason, message string) v1.Event {
	t := metav1.NewTime(now)
	return v1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%v.%x", obj.Name, t.UnixNano()),
			Namespace: obj.Namespace,
		},
		InvolvedObject: obj,
		Reason:         reason,
		Message:        message,
		Source:         v1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: t,
		LastTimestamp:  t,
		Count:          1,
		Type:           eventType,
	}
}

func parityPodRef(namespace, name, fieldPath string) v1.ObjectReference {
	return v1.ObjectReference{
		Kind:       "Pod",
		Namespace:  namespace,
		Name:       name,
		UID:        types.UID("uid-" + namespace + "-" + name),
		APIVersion: "v1",
		FieldPath:  fieldPath,
	}
}

// parityDescribe renders an event compactly for failure messages.
func parityDescribe(e *v1.Event) string {
	if e == nil {
		return "<nil>"
	}
	fp := ""
	if e.InvolvedObject.FieldPath != "" {
		fp = "[" + e.InvolvedObject.FieldPath + "]"
	}
	return fmt.Sprintf("{name=%s obj=%s/%s%s type=%s reason=%s msg=%q src=%s ctrl=%q count=%d}",
		e.Name, e.InvolvedObject.Namespace, e.InvolvedObject.Name, fp,
		e.Type, e.Reason, e.Message, e.Source.Component, e.ReportingController, e.Count)
}

func parityMust(t *testing.T, what string, o parityOutcome) {
	t.Helper()
	if d := o.diff(); len(d) > 0 {
		t.Errorf("%s: client-go and ours differ:\n  %s", what, strings.Join(d, "\n  "))
	}
}
