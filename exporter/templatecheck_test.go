package exporter

import (
	"strings"
	"testing"
)

func TestTemplateThatFailsOnEveryEventIsRefusedWithItsLine(t *testing.T) {
	for doc, want := range map[string]string{
		"stdout:\n      layout:\n        labels: \"{{ .InvolvedObject.Labelz }}\"": `line 6: receiver "r": layout: template "{{.InvolvedObject.Labelz}}" ` +
			"fails on every event: at <.InvolvedObject.Labelz>: can't evaluate field Labelz",
		"slack:\n      token: t\n      channel: c\n      title: \"{{ .GetTimestampMs 3 }}\"\n      fields: {a: b}": `receiver "r": title: ` +
			"template \"{{ .GetTimestampMs 3 }}\" fails on every event: at <.GetTimestampMs>: wrong number of args",
		"opsgenie:\n      apiKey: k\n      message: m\n      details: {kind: \"{{ .InvolvedObject.Kindd }}\"}": `receiver "r": ` +
			"details.kind: template \"{{ .InvolvedObject.Kindd }}\" fails on every event",
		"opscenter:\n      title: t\n      source: s\n      description: \"{{ .Labelz }}\"": `receiver "r": ` +
			"description: template \"{{ .Labelz }}\" fails on every event",
	} {
		_, err := ParseConfig("c.yaml", []byte("route: {match: [{receiver: r}]}\nreceivers:\n  - name: r\n    "+doc+"\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\nerr %v\nwant %q", doc, err, want)
		}
	}
}

// Their records have no fanout object: with compat
// kubernetes-event-exporter, a template of it fails on every event.
func TestTemplateOfTheFanoutObjectIsRefusedWithTheirStream(t *testing.T) {
	const doc = "route: {match: [{receiver: r}]}\nreceivers:\n  - name: r\n    stdout:\n      layout: {key: \"{{ .Fanout.Key }}\"}\n"
	parseOK(t, doc)
	_, err := ParseConfig("c.yaml", []byte("compat: kubernetes-event-exporter\n"+doc))
	if err == nil || !strings.Contains(err.Error(), `fails on every event`) ||
		!strings.Contains(err.Error(), "the record has no fanout object") {
		t.Errorf("err %v, want the fanout template refused with their stream", err)
	}
}

func TestHeaderTemplateThatFailsOnEveryEventIsAWarningAsItIsSentAsWritten(t *testing.T) {
	c := parseOK(t, `route: {match: [{receiver: r}]}
receivers:
  - name: r
    webhook:
      endpoint: https://hook.example
      headers: {X-Kind: "{{ .Regarding.Kind }}"}
`)
	wantWarnings(t, c, `line 3: receiver "r": headers.X-Kind: template "{{ .Regarding.Kind }}" fails on every event: `+
		"the header is sent as written")
}

func TestTemplateThatFailsInAFunctionIsAWarning(t *testing.T) {
	c := parseOK(t, `route: {match: [{receiver: r}]}
receivers:
  - name: r
    stdout:
      layout:
        parsed: "{{ .Message | mustFromJson }}"
`)
	wantWarnings(t, c, `line 6: receiver "r": layout: template "{{.Message | mustFromJson}}" fails on a sample event `+
		"(it may succeed on others)")
}

func TestTemplatesOfTheirExamplesRunOnTheSampleEvent(t *testing.T) {
	c := parseOK(t, `route: {match: [{receiver: r}]}
receivers:
  - name: r
    stdout:
      deDot: true
      layout:
        created: "{{ .GetTimestampISO8601 }}"
        ms: "{{ .GetTimestampMs }}"
        owner: "{{ (index .InvolvedObject.OwnerReferences 0).Name }}"
        app: "{{ index .InvolvedObject.Labels \"app\" }}"
        related: "{{ .Related.Name }}"
        series: "{{ .Series.Count }}"
        json: "{{ toJson . }}"
`)
	if len(c.Warnings) != 0 {
		t.Errorf("warnings %q", c.Warnings)
	}
}
