package exporter

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// aliasBomb returns a document whose layout value expands, through
// levels of aliases each listing the previous level three times, to 3^levels
// strings (a "billion laughs"): 10 levels is 59,049 strings in 560 bytes.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("l0: &l0 [\"x\", \"x\", \"x\"]\n")
	for i := 1; i < levels; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [*l%d, *l%d, *l%d]\n", i, i, i-1, i-1, i-1)
	}
	fmt.Fprintf(&b, "route: {match: [{receiver: out}]}\nreceivers:\n  - name: out\n    stdout:\n      layout:\n        x: *l%d\n", levels-1)
	return b.String()
}

// allocated returns the bytes f allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestAliasBombIsRefusedWithinTenMegabytesOfAllocations(t *testing.T) {
	for _, levels := range []int{10, 20, 40} {
		doc := aliasBomb(levels)
		var err error
		bytes := allocated(func() { _, err = ParseConfig("bomb.yaml", []byte(doc)) })
		if err == nil || !strings.Contains(err.Error(), "aliases expand the document to more than") {
			t.Errorf("%d levels (%d bytes): err %v, want the alias expansion refused", levels, len(doc), err)
		}
		if bytes > 10<<20 {
			t.Errorf("%d levels: refusing it allocated %d MB, want under 10 MB", levels, bytes>>20)
		}
		t.Logf("%d levels, %d bytes of YAML: refused after %d KB of allocations", levels, len(doc), bytes>>10)
	}
}

func TestAliasBombThroughMergeKeysIsRefusedToo(t *testing.T) {
	var b strings.Builder
	b.WriteString("m0: &m0 {a: \"{{ .Reason }}\", b: \"{{ .Reason }}\", c: \"{{ .Reason }}\"}\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&b, "m%d: &m%d {x: *m%d, y: *m%d, z: *m%d}\n", i, i, i-1, i-1, i-1)
	}
	b.WriteString("route: {match: [{receiver: out}]}\nreceivers:\n  - name: out\n    stdout:\n      layout:\n        <<: *m11\n")
	_, err := ParseConfig("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "aliases expand the document") {
		t.Errorf("err %v, want the expansion refused", err)
	}
}

func TestAnchorsReusedByManyReceiversLoad(t *testing.T) {
	var b strings.Builder
	b.WriteString("route:\n  match:\n")
	for i := range 50 {
		fmt.Fprintf(&b, "    - receiver: r%d\n", i)
	}
	b.WriteString("receivers:\n")
	for i := range 50 {
		fmt.Fprintf(&b, "  - name: r%d\n    stdout:\n      layout: ", i)
		if i == 0 {
			b.WriteString("&layout {reason: \"{{ .Reason }}\", kind: \"{{ .InvolvedObject.Kind }}\", message: \"{{ .Message }}\"}\n")
		} else {
			b.WriteString("*layout\n")
		}
	}
	if _, err := ParseConfig("anchors.yaml", []byte(b.String())); err != nil {
		t.Fatal(err)
	}
}

func TestUnquotedTemplateIsRefusedAsTheirsRefusesItWithTheOtherProblems(t *testing.T) {
	_, err := ParseConfig("c.yaml", []byte(`route: {match: [{receiver: out}]}
receivers:
  - name: out
    stdout:
      layout:
        msg: {{ .Message }}
    queue: {strategy: Sometimes}
`))
	for _, want := range []string{"line 6: a template must be quoted", `line 3: receiver "out": queue.strategy "Sometimes" is unknown`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v, want %q", err, want)
		}
	}
}

func TestYAMLSyntaxErrorsNameTheOffendingLine(t *testing.T) {
	for doc, want := range map[string]string{
		// yaml.v3 names the enclosing block's line (2, 1, 2) for the first three.
		"route: {match: [{receiver: a}]}\nreceivers:\n  - name: a\n    stdout: {}\n   layout: {}\n": "line 5:",
		"receivers:\n  - name: a\n    webhook:\n      endpoint: x\n     headers: {}\n":              "line 5:",
		"a: 1\nb:\n  c: 2\n d: 3\n":                       "line 4:",
		"route: {match: [{receiver: a}]\nreceivers: []\n": "line 2:",
	} {
		_, err := ParseConfig("c.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), "c.yaml:\n  "+want) {
			t.Errorf("%q: err %v, want it at %s", doc, err, want)
		}
	}
}

func TestRefusedConfigurationListsItsWarningsWithItsProblems(t *testing.T) {
	_, err := ParseConfig("c.yaml", []byte(`route: {match: [{receiver: out}]}
recievers:
  - name: out
    stdout: {}
`))
	for _, want := range []string{"receivers: at least one receiver is required",
		"warnings:\n  line 2: unknown field recievers: ignored (kubernetes-event-exporter ignores unknown keys too); did you mean receivers?"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v\nwant %q", err, want)
		}
	}
	_, err = ParseConfig("c.yaml", []byte(`route: {match: [{receiver: out}]}
receivers:
  - name: out
    stdout: {}
receivers:
  - name: other
    stdout: {}
`))
	if err == nil || !strings.Contains(err.Error(), `line 2: key "receivers" is set again at line 5`) {
		t.Errorf("err %v, want the duplicated receivers: among the warnings", err)
	}
}

func TestWebhookWithABadEndpointReportsItsOtherProblemsToo(t *testing.T) {
	_, err := ParseConfig("c.yaml", []byte(`route: {match: [{receiver: hook}]}
receivers:
  - name: hook
    webhook:
      endpoint: "not a url"
      tls: {certFile: /etc/hook/client.crt}
`))
	for _, want := range []string{`webhook.endpoint "not a url" is not an http or https URL`,
		"webhook.tls: certFile and keyFile go together"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v, want %q", err, want)
		}
	}
}

func TestConfigurationWhoseRouteNamesNoReceiverIsWarned(t *testing.T) {
	c := parseOK(t, "receivers: [{name: a, stdout: {}}]\n")
	wantWarnings(t, c, "route: no rule names a receiver: nothing is exported")
	c = parseOK(t, "route:\n  drop: [{namespace: kube-system}]\nreceivers: [{name: a, stdout: {}}]\n")
	wantWarnings(t, c, "line 1: route: no rule names a receiver")
}

// A regular expression in double quotes with a backslash YAML does not
// escape (\w, \d, \.) loads, as in kubernetes-event-exporter, whose parser
// (goccy/go-yaml v1.11) keeps the backslash as written: the rules then
// hold those expressions and route as theirs do, with a warning per
// escape. YAML's own escapes (\t, \") keep their meaning. It refused
// the whole file ("found unknown escape character").
func TestDoubleQuotedRegexWithBackslashesLoadsAsTheirs(t *testing.T) {
	c, err := ParseConfig("c.yaml", []byte(`route:
  drop:
    - namespace: "^kube-\w+$"
  match:
    - receiver: a
      message: "Back\.?[Oo]ff\t\d+ \"x\""
receivers:
  - name: a
    stdout: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Route.Drop[0].Namespace.re.String(); got != `^kube-\w+$` {
		t.Errorf("drop namespace %q", got)
	}
	if got := c.Route.Match[0].Message.re.String(); got != "Back\\.?[Oo]ff\t\\d+ \"x\"" {
		t.Errorf("match message %q", got)
	}
	o := occ("u", 1, "app")
	o.Message = "BackOff\t3 \"x\""
	if set, dropped := c.Route.receivers(o); set != 1 || dropped {
		t.Errorf("receivers %b (dropped %v), want a", set, dropped)
	}
	o.Namespace = "kube-system"
	if _, dropped := c.Route.receivers(o); !dropped {
		t.Error("kube-system not dropped")
	}
	var warned int
	for _, w := range c.Warnings {
		if strings.Contains(w, "in double quotes kept as written") {
			warned++
		}
	}
	if warned != 3 {
		t.Errorf("%d warnings about kept escapes, want 3: %q", warned, c.Warnings)
	}
}
