package exporter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var recordTime = metav1.NewTime(time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC))

func backOffEvent() *corev1.Event {
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1.18a", UID: "e-1", ResourceVersion: "42",
			CreationTimestamp: recordTime},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-1", UID: "p-1", APIVersion: "v1",
			FieldPath: "spec.containers{web}"},
		Reason: "BackOff", Message: "Back-off restarting failed container", Type: "Warning", Count: 3,
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: recordTime, LastTimestamp: recordTime,
	}
}

// theirRecord is what kubernetes-event-exporter v1.6.1 writes for
// backOffEvent with clusterName prod and omitLookup: true: the output of
// its kube.EnhancedEvent.ToJSON, run on this event. Ours adds the
// "fanout" object at the end.
const theirRecord = `{"metadata":{"name":"web-1.18a","namespace":"shop","uid":"e-1","resourceVersion":"42","creationTimestamp":"2026-11-27T06:00:00Z"},` +
	`"reason":"BackOff","message":"Back-off restarting failed container","source":{"component":"kubelet","host":"node-1"},` +
	`"firstTimestamp":"2026-11-27T06:00:00Z","lastTimestamp":"2026-11-27T06:00:00Z","count":3,"type":"Warning",` +
	`"eventTime":null,"reportingComponent":"","reportingInstance":"","clusterName":"prod",` +
	`"involvedObject":{"kind":"Pod","namespace":"shop","name":"web-1","uid":"p-1","apiVersion":"v1","fieldPath":"spec.containers{web}","deleted":false}}`

// ourRecord is theirRecord with the "fanout" object.
var ourRecord = theirRecord[:len(theirRecord)-1] + `,"fanout":{"uid":"e-1","count":3,"key":"e-1/3","api":"v1"}}`

func TestDefaultRecordIsTheEventAsKubernetesEventExporterWritesIt(t *testing.T) {
	got := string(FromCore(backOffEvent()).EventJSON("prod"))
	if got != ourRecord {
		t.Errorf("record\n%s\nwant\n%s", got, ourRecord)
	}
}

func TestRecordOfAnEventsV1EventIsItsCoreV1Equivalent(t *testing.T) {
	e := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x", UID: "e-2"},
		EventTime:  metav1.NewMicroTime(recordTime.Time), Series: &eventsv1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(recordTime.Time)},
		ReportingController: "kubelet", ReportingInstance: "node-1", Action: "Pulling", Reason: "Pulling", Note: "pulling image",
		Regarding: corev1.ObjectReference{Kind: "Pod", Name: "web-1"}, Type: "Normal",
	}
	var rec map[string]any
	if err := json.Unmarshal(FromEvents(e).EventJSON(""), &rec); err != nil {
		t.Fatal(err)
	}
	series, _ := rec["series"].(map[string]any)
	obj, _ := rec["involvedObject"].(map[string]any)
	fan, _ := rec["fanout"].(map[string]any)
	if rec["message"] != "pulling image" || rec["reportingComponent"] != "kubelet" || series["count"] != 7.0 ||
		obj["name"] != "web-1" || fan["key"] != "e-2/7" || fan["api"] != EventsV1 || rec["clusterName"] != "" {
		t.Errorf("record %v", rec)
	}
}

func TestRecordOfAProgramsOccurrenceCarriesItsFields(t *testing.T) {
	var rec EnhancedEvent
	if err := json.Unmarshal(occ("u", 2, "ns").EventJSON("c"), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Namespace != "ns" || rec.Count != 2 || rec.InvolvedObject.Name != "p-u" || rec.ClusterName != "c" || rec.Fanout.Key != "u/2" {
		t.Errorf("record %+v", rec)
	}
}

func TestReceiversWriteTheirFormatWithTheClusterName(t *testing.T) {
	dir := t.TempDir()
	c := parseOK(t, `clusterName: prod
receivers:
  - name: events
    file: {path: `+filepath.Join(dir, "events")+`}
  - name: occurrences
    file: {path: `+filepath.Join(dir, "occurrences")+`}
    format: fanout
`)
	sinks, err := c.buildSinks()
	if err != nil {
		t.Fatal(err)
	}
	o := FromCore(backOffEvent())
	for _, s := range sinks {
		if _, err := s.Write(t.Context(), []*Occurrence{o}); err != nil {
			t.Fatal(err)
		}
		_ = s.Close(t.Context())
	}
	events, _ := os.ReadFile(filepath.Join(dir, "events"))
	occurrences, _ := os.ReadFile(filepath.Join(dir, "occurrences"))
	if string(events) != ourRecord+"\n" {
		t.Errorf("default format wrote %s", events)
	}
	if string(occurrences) != string(o.JSON())+"\n" || !strings.Contains(string(occurrences), `"uid":"e-1","count":3`) {
		t.Errorf("format fanout wrote %s", occurrences)
	}
}

func TestUnknownFormatIsRejectedWithTheLine(t *testing.T) {
	_, err := ParseConfig("c.yaml", []byte("receivers:\n  - name: a\n    stdout: {}\n    format: xml\n"))
	if err == nil || !strings.Contains(err.Error(), `line 2: receiver "a": format "xml" is unknown`) {
		t.Errorf("error %v", err)
	}
}

func TestDeDotReplacesDotsInLabelAndAnnotationKeys(t *testing.T) {
	e := FromCore(backOffEvent()).Enhanced("")
	e.Labels = map[string]string{"app.kubernetes.io/name": "web"}
	e.InvolvedObject.Annotations = map[string]string{"a.b": "c"}
	d := e.DeDot()
	if d.Labels["app_kubernetes_io/name"] != "web" || d.InvolvedObject.Annotations["a_b"] != "c" || e.Labels["app.kubernetes.io/name"] != "web" {
		t.Errorf("dedotted %v %v; original %v", d.Labels, d.InvolvedObject.Annotations, e.Labels)
	}
}

func TestTimestampMethodsOfLayoutsUseTheFirstTimestampElseTheEventTime(t *testing.T) {
	e := FromCore(backOffEvent()).Enhanced("")
	if e.GetTimestampMs() != recordTime.UnixMilli() || e.GetTimestampISO8601() != "2026-11-27T06:00:00.000Z" {
		t.Errorf("ms %d, iso %s", e.GetTimestampMs(), e.GetTimestampISO8601())
	}
	e.FirstTimestamp = metav1.Time{}
	e.EventTime = metav1.NewMicroTime(recordTime.Add(time.Second))
	if e.GetTimestampMs() != recordTime.UnixMilli()+1000 {
		t.Errorf("ms %d, want the event time", e.GetTimestampMs())
	}
}

func BenchmarkRecordEncoding(b *testing.B) {
	e := backOffEvent()
	for _, bc := range []struct {
		name string
		enc  func(o *Occurrence) []byte
	}{
		{"event", func(o *Occurrence) []byte { return o.EventJSON("prod") }},
		{"fanout", (*Occurrence).JSON},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.enc(FromCore(e))
			}
		})
	}
}
