package exporter

import (
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/fanout-go/fanout/exporter/internal/awstest"
)

// No Systems Manager emulator installs here: these tests run against
// awstest.Fake, with CreateOpsItem's shapes from the Systems Manager API
// reference.

// createOpsItem is CreateOpsItem's input.
type createOpsItem struct {
	Title, Description, Source, Category, Severity, OpsItemType, AccountId string
	Priority                                                               *int
	OperationalData                                                        map[string]struct{ Value, Type string }
	Notifications                                                          []struct{ Arn string }
	RelatedOpsItems                                                        []struct{ OpsItemId string }
	Tags                                                                   []struct{ Key, Value string }
	ActualStartTime, ActualEndTime, PlannedStartTime, PlannedEndTime       *float64
}

// fakeOpsCenter is OpsCenter behind an awstest.Fake.
type fakeOpsCenter struct {
	*awstest.Fake
	mu    sync.Mutex
	items []createOpsItem
}

func newFakeOpsCenter(t *testing.T) *fakeOpsCenter {
	f := &fakeOpsCenter{Fake: awstest.NewFake(t, "ssm", "AmazonSSM")}
	awstest.Handle(f.Fake, "CreateOpsItem", func(in createOpsItem) (any, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.items = append(f.items, in)
		id := "oi-" + f.NextID()
		return map[string]string{"OpsItemId": id, "OpsItemArn": "arn:aws:ssm:" + awstest.Region + ":123456789012:opsitem/" + id}, nil
	})
	return f
}

// opsCenterReceiver returns the sink of an opscenter receiver with the
// keys of body, its region and endpoint set to the test's and f.
func opsCenterReceiver(t *testing.T, f *fakeOpsCenter, body string) Sink {
	t.Helper()
	return fakeReceiver(t, "clusterName: prod-eu\nreceivers:\n  - name: ops\n    opscenter:\n"+body, f.URL,
		func(r *Receiver) *AWSConfig { return &r.Opscenter.AWSConfig })
}

// theirOpsCenter is an opscenter receiver with every key of theirs.
const theirOpsCenter = `      title: "{{ .Reason }} {{ .InvolvedObject.Kind }}/{{ .InvolvedObject.Name }}"
      description: "{{ .Message }}"
      source: "kubernetes {{ .ClusterName }}"
      category: "Availability"
      severity: "{{ if eq .Type \"Warning\" }}2{{ else }}4{{ end }}"
      priority: "{{ if eq .Type \"Warning\" }}1{{ else }}3{{ end }}"
      operationalData:
        namespace: "{{ .Namespace }}"
        kind: "{{ .InvolvedObject.Kind }}"
      tags:
        team: platform
        reason: "{{ .Reason }}"
      notifications: ["arn:aws:sns:eu-west-3:123456789012:ops"]
      relatedOpsItems: ["oi-0123456789ab"]
`

func TestOpsCenterCreatesAnOpsItemPerOccurrenceFromTheirTemplates(t *testing.T) {
	f := newFakeOpsCenter(t)
	s := opsCenterReceiver(t, f, theirOpsCenter)
	warn := occ("a", 1, "prod")
	warn.Type = "Warning"
	batch := []*Occurrence{warn, occ("b", 1, "dev")}
	if n, err := s.Write(t.Context(), batch); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	if len(f.items) != 2 {
		t.Fatalf("%d OpsItems, want 2", len(f.items))
	}
	it := f.items[0]
	if it.Title != "Test Pod/p-a" || it.Description != "message of a" || it.Source != "kubernetes prod-eu" ||
		it.Category != "Availability" || it.Severity != "2" || it.Priority == nil || *it.Priority != 1 {
		t.Errorf("OpsItem %+v", it)
	}
	if d := it.OperationalData; len(d) != 2 || d["namespace"].Value != "prod" || d["namespace"].Type != "SearchableString" ||
		d["kind"].Value != "Pod" {
		t.Errorf("operational data %+v, want namespace and kind, searchable", d)
	}
	if len(it.Tags) != 2 || it.Tags[0].Key != "reason" || it.Tags[0].Value != "Test" || it.Tags[1].Value != "platform" {
		t.Errorf("tags %+v", it.Tags)
	}
	// kubernetes-event-exporter sends the operational data's values as
	// related OpsItems; the configured ones are sent here.
	if len(it.Notifications) != 1 || it.Notifications[0].Arn != "arn:aws:sns:eu-west-3:123456789012:ops" ||
		len(it.RelatedOpsItems) != 1 || it.RelatedOpsItems[0].OpsItemId != "oi-0123456789ab" {
		t.Errorf("notifications %+v, related %+v", it.Notifications, it.RelatedOpsItems)
	}
	if it := f.items[1]; it.Severity != "4" || *it.Priority != 3 {
		t.Errorf("normal event's severity %s, priority %d; want 4 and 3", it.Severity, *it.Priority)
	}
}

// With compat kubernetes-event-exporter the templates see their record,
// which has no fanout object.
func TestOpsCenterWithTheirStreamRendersTheirRecordWithoutTheFanoutObject(t *testing.T) {
	f := newFakeOpsCenter(t)
	s := fakeReceiver(t, "compat: kubernetes-event-exporter\nreceivers:\n  - name: ops\n    opscenter:\n"+
		"      title: t\n      description: \"{{ toJson . }}\"\n      source: s\n", f.URL,
		func(r *Receiver) *AWSConfig { return &r.Opscenter.AWSConfig })
	o := occ("a", 1, "ns")
	if n, err := s.Write(t.Context(), []*Occurrence{o}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if want := string(o.theirEventJSON("")); len(f.items) != 1 || f.items[0].Description != want || strings.Contains(want, "fanout") {
		t.Errorf("OpsItems %+v, want the description %s", f.items, want)
	}
}

func TestOpsCenterOptionalKeysUnsetAreNotSent(t *testing.T) {
	f := newFakeOpsCenter(t)
	s := opsCenterReceiver(t, f, "      title: t\n      description: d\n      source: s\n")
	if n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	body := string(f.Requests()[0].Body)
	for _, key := range []string{"Category", "Severity", "Priority", "OperationalData", "Tags", "Notifications", "RelatedOpsItems"} {
		if strings.Contains(body, `"`+key+`"`) {
			t.Errorf("%s sent: %s", key, body)
		}
	}
}

func TestOpsCenterTitleAndDescriptionAreCutToTheServicesLimits(t *testing.T) {
	f := newFakeOpsCenter(t)
	s := opsCenterReceiver(t, f, "      title: \"{{ .Message }}\"\n      description: \"{{ .Message }}{{ .Message }}\"\n      source: s\n")
	o := occ("a", 1, "ns")
	o.Message = strings.Repeat("é", 1500)
	if n, err := s.Write(t.Context(), []*Occurrence{o}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if it := f.items[0]; utf8.RuneCountInString(it.Title) != 1024 || utf8.RuneCountInString(it.Description) != 2048 ||
		!utf8.ValidString(it.Title) {
		t.Errorf("title of %d characters, description of %d; want 1024 and 2048",
			utf8.RuneCountInString(it.Title), utf8.RuneCountInString(it.Description))
	}
}

// A template that fails on some events (one that fails on every event is
// refused at load) rejects those.
func TestOpsCenterOccurrenceWhoseTemplatesFailIsPermanentAndNotSent(t *testing.T) {
	f := newFakeOpsCenter(t)
	for body, want := range map[string]string{
		"      title: t\n      description: '{{ if not .InvolvedObject.Labels }}{{ fail \"no labels\" }}{{ end }}'\n      source: s\n": "no labels",
		"      title: t\n      description: d\n      source: s\n      priority: high\n":                                                `priority "high" is not a number`,
	} {
		s := opsCenterReceiver(t, f, body)
		n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
		wantFailure(t, want, n, err, true)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v, want %q", err, want)
		}
	}
	if len(f.Requests()) != 0 {
		t.Errorf("%d requests, want none", len(f.Requests()))
	}
}

func TestOpsCenterRequiresTitleDescriptionAndSourceAndValidTemplates(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"opscenter: {description: d, source: s}":                            "opscenter.title is required",
		"opscenter: {title: t, source: s}":                                  "opscenter.description is required",
		"opscenter: {title: t, description: d}":                             "opscenter.source is required",
		`opscenter: {title: "{{ .Reason", description: d, source: s}`:       `opscenter.title: invalid template "{{ .Reason"`,
		`opscenter: {title: t, description: d, source: s, tags: {a: "{{"}}`: `opscenter.tags.a: invalid template`,
	})
}
