package exporter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// writeWith builds the receiver of a one-receiver configuration around a
// buffer and writes batch; it returns what was written and the result.
func writeWith(t *testing.T, yaml string, batch ...*Occurrence) (string, int, error) {
	t.Helper()
	c := parseOK(t, yaml)
	var out bytes.Buffer
	s := &WriterSink{W: &out, Encode: c.Receivers[0].encoder(c.ClusterName)}
	n, err := s.Write(t.Context(), batch)
	return out.String(), n, err
}

func labelledEvent() *Occurrence {
	e := backOffEvent()
	e.Labels = map[string]string{"app.kubernetes.io/name": "web"}
	return FromCore(e)
}

func TestLayoutOfTheirREADMEIsRenderedWithTheirFields(t *testing.T) {
	got, _, err := writeWith(t, `clusterName: prod
receivers:
  - name: out
    stdout:
      layout:
        region: "us-west-2"
        createdAt: "{{ .GetTimestampMs }}"
        details:
          message: "{{ .Message }}"
          count: "{{ .Count }}"
          kind: "{{ .InvolvedObject.Kind }}"
          component: "{{ .Source.Component }}"
          labels: "{{ toJson .InvolvedObject.Labels }}"
          cluster: "{{ .ClusterName }}"
          upper: "{{ .Reason | upper }}"
          key: "{{ .Fanout.Key }}"
        tags: ["event", "{{ .Reason }}"]
`, FromCore(backOffEvent()))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(got), &rec); err != nil {
		t.Fatalf("%q: %v", got, err)
	}
	want := map[string]any{"region": "us-west-2", "createdAt": "1795759200000", "tags": []any{"event", "BackOff"},
		"details": map[string]any{"message": "Back-off restarting failed container", "count": "3", "kind": "Pod",
			"component": "kubelet", "labels": "null", "cluster": "prod", "upper": "BACKOFF", "key": "e-1/3"}}
	if !reflect.DeepEqual(rec, want) {
		t.Errorf("record\n%v\nwant\n%v", rec, want)
	}
}

func TestLayoutTemplateThatDoesNotParseIsRejectedWithItsLine(t *testing.T) {
	_, err := ParseConfig("c.yaml", []byte("receivers:\n  - name: a\n    file:\n      path: /tmp/x\n      layout:\n        m: \"{{ .Message \"\n"))
	if err == nil || !strings.Contains(err.Error(), "line 6: layout: invalid template") {
		t.Errorf("error %v", err)
	}
}

func TestLayoutScalarThatIsNotAStringIsWrittenAsItIsWithAWarning(t *testing.T) {
	yaml := "receivers:\n  - name: a\n    stdout:\n      layout:\n        n: 5\n        ok: true\n        none: null\n"
	wantWarnings(t, parseOK(t, yaml), "line 5: layout value 5 is written as it is", "line 6: layout value true")
	got, _, err := writeWith(t, yaml, occ("u", 1, "ns"))
	if err != nil || got != `{"n":5,"none":null,"ok":true}`+"\n" {
		t.Errorf("wrote %q, %v", got, err)
	}
}

func TestLayoutThatFailsDropsThatOccurrenceOnlyAsPermanent(t *testing.T) {
	got, n, err := writeWith(t, "receivers:\n  - name: a\n    stdout:\n      layout: {m: \"{{ if eq .Reason \\\"Bad\\\" }}{{ .NoSuchField }}{{ end }}ok\"}\n",
		occ("a", 1, "ns"), func() *Occurrence { o := occ("b", 1, "ns"); o.Reason = "Bad"; return o }(), occ("c", 1, "ns"))
	if n != 1 || !IsPermanent(err) || got != `{"m":"ok"}`+"\n" {
		t.Errorf("wrote %q, n %d, err %v; want the first written and a permanent error for the second", got, n, err)
	}
}

func TestDeDotAppliesToTheRecordAndTheLayoutData(t *testing.T) {
	got, _, _ := writeWith(t, "receivers:\n  - name: a\n    stdout: {deDot: true}\n", labelledEvent())
	if !strings.Contains(got, `"labels":{"app_kubernetes_io/name":"web"}`) {
		t.Errorf("record %s", got)
	}
	got, _, _ = writeWith(t, "receivers:\n  - name: a\n    stdout:\n      deDot: true\n      layout: {l: \"{{ toJson .Labels }}\"}\n", labelledEvent())
	if got != `{"l":"{\"app_kubernetes_io/name\":\"web\"}"}`+"\n" {
		t.Errorf("layout record %s", got)
	}
	got, _, _ = writeWith(t, "receivers:\n  - name: a\n    stdout: {}\n", labelledEvent())
	if !strings.Contains(got, `"app.kubernetes.io/name"`) {
		t.Errorf("without deDot: %s", got)
	}
}

func TestDeDotPlaceholderOfTheirREADMELoadsAsFalseWithAWarning(t *testing.T) {
	c := parseOK(t, "receivers:\n  - name: a\n    stdout:\n      deDot: true|false\n")
	wantWarnings(t, c, `line 4: deDot: "true|false" is not a boolean; taken as false`)
	if c.Receivers[0].Stdout.DeDot.V {
		t.Error("deDot set")
	}
}

func TestLayoutAndDeDotDoNotApplyToFormatFanout(t *testing.T) {
	_, err := ParseConfig("c.yaml", []byte("receivers:\n  - name: a\n    format: fanout\n    stdout: {deDot: true}\n"))
	if err == nil || !strings.Contains(err.Error(), "layout and deDot apply to format event") {
		t.Errorf("error %v", err)
	}
}

// TestLayoutTemplateGivesWhatTheirsGives pins the output of
// kubernetes-event-exporter v1.6.1's sinks.GetString for this template on
// backOffEvent (clusterName prod), run against its module.
func TestLayoutTemplateGivesWhatTheirsGives(t *testing.T) {
	const theirs = "1795759200000|2026-11-27T06:00:00.000Z|null|<no value>|e-1|BACKOFF"
	got, _, err := writeWith(t, "clusterName: prod\nreceivers:\n  - name: a\n    stdout:\n      layout: {t: "+
		`"{{ .GetTimestampMs }}|{{ .GetTimestampISO8601 }}|{{ toJson .InvolvedObject.Labels }}|{{ .InvolvedObject.Labels.owner }}|{{ .UID }}|{{ .Reason | upper }}"`+
		"}\n", FromCore(backOffEvent()))
	var rec struct{ T string }
	if err != nil || json.Unmarshal([]byte(got), &rec) != nil || rec.T != theirs {
		t.Errorf("rendered %q (%v), want %q", got, err, theirs)
	}
}

// A layout that refers to itself through an alias (a YAML cycle) is a
// configuration error with the alias's line. It made ParseConfig recurse
// without end: a fatal stack overflow, not a recoverable panic, so the
// parse runs in a child process.
func TestLayoutAliasCycleIsAConfigErrorWithItsLine(t *testing.T) {
	const cyclic = "receivers:\n  - name: a\n    stdout:\n      layout: &l\n        a: [x, {b: *l}]\n"
	if os.Getenv("LAYOUT_CYCLE_CHILD") == "1" {
		_, err := ParseConfig("c.yaml", []byte(cyclic))
		fmt.Println("parse returned:", err)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLayoutAliasCycleIsAConfigErrorWithItsLine$")
	cmd.Env = append(os.Environ(), "LAYOUT_CYCLE_CHILD=1")
	out, err := cmd.CombinedOutput()
	first, _, _ := strings.Cut(string(out), "\n\n")
	if err != nil || !strings.Contains(string(out), "parse returned:") {
		t.Fatalf("child process: %v\n%s", err, first)
	}
	if want := "line 5: layout: alias *l refers to a node that contains it"; !strings.Contains(string(out), want) {
		t.Errorf("parse returned %s\nwant an error containing %q", first, want)
	}
}

// A layout nested deeper than the walk's bound, aliases followed, is a
// configuration error rather than a deep recursion.
func TestLayoutNestedTooDeepIsAConfigError(t *testing.T) {
	deep := strings.Repeat("[", 101) + strings.Repeat("]", 101)
	wantConfigErrors(t, map[string]string{"stdout: {layout: {a: " + deep + "}}": "layout: nested more than 100 levels deep"})
}

// kubernetes-event-exporter's YAML libraries apply merge keys (<<, YAML
// 1.1) when decoding the layout: a map or a list of maps is merged, the
// layout's own keys win, and an earlier map of the list wins over a later
// one. Ours wrote a field named "<<".
func TestLayoutMergeKeyIsMergedAsYAML11(t *testing.T) {
	out, n, err := writeWith(t, `
common: &common
  reason: "{{ .Reason }}"
  msg: overridden
extra: &extra
  kind: "{{ .InvolvedObject.Kind }}"
  reason: later
receivers:
  - name: w
    stdout:
      layout:
        <<: [*common, *extra, {name: "{{ .InvolvedObject.Name }}"}]
        msg: "{{ .Message }}"
        nested: {<<: *extra}
`, occ("a", 1, "ns"))
	if n != 1 || err != nil {
		t.Fatal(n, err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"reason": "Test", "msg": "message of a", "kind": "Pod", "name": "p-a",
		"nested": map[string]any{"kind": "Pod", "reason": "later"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layout rendered %s, want %v", out, want)
	}
}

// A merge key whose value is not a map or a list of maps, or a merge of
// the map that holds it, is a configuration error with its line.
func TestLayoutInvalidMergeKeyIsAConfigError(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"stdout: {layout: {<<: x}}":           "line 3: layout: merge key <<: expected a map or a list of maps",
		"stdout: {layout: {<<: [{a: x}, y]}}": "line 3: layout: merge key <<: expected a map or a list of maps",
		"stdout: {layout: &l {a: x, <<: *l}}": "line 3: layout: alias *l refers to a node that contains it",
	})
}
