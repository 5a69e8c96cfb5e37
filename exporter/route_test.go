package exporter

import (
	"slices"
	"strings"
	"testing"
)

func TestRouteTreeAppliesDropThenMatchThenChildren(t *testing.T) {
	c, err := ParseConfig("r.yaml", []byte(`
route:
  drop:
    - namespace: "^kube-system$"
  match:
    - receiver: all
  routes:
    - drop:
        - reason: "^Pulled$"
      match:
        - type: "^Warning$"
          receiver: warnings
        - minCount: 5
          receiver: repeats
    - match:
        - kind: "^Node$"
      routes:
        - match:
            - receiver: nodes
receivers:
  - {name: all, stdout: {}}
  - {name: warnings, stdout: {}}
  - {name: repeats, stdout: {}}
  - {name: nodes, stdout: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	const all, warnings, repeats, nodes = 1, 2, 4, 8
	mk := func(ns, kind, reason, typ string, count int32) *Occurrence {
		o := occ("u", count, ns)
		o.Regarding.Kind, o.Reason, o.Type = kind, reason, typ
		return o
	}
	cases := []struct {
		name    string
		o       *Occurrence
		want    uint64
		dropped bool
	}{
		{"dropped at the root", mk("kube-system", "Pod", "BackOff", "Warning", 9), 0, true},
		{"normal pod event", mk("app", "Pod", "Started", "Normal", 1), all, false},
		{"warning", mk("app", "Pod", "BackOff", "Warning", 1), all | warnings, false},
		{"all match rules of a child hold: its children too, once each", mk("app", "Pod", "BackOff", "Warning", 7), all | warnings | repeats, false},
		{"dropped in a child only", mk("app", "Pod", "Pulled", "Warning", 7), all, false},
		{"filter rule without receiver gates the children", mk("app", "Node", "Rebooted", "Normal", 1), all | nodes, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, dropped := c.Route.receivers(tc.o)
			if got != tc.want || dropped != tc.dropped {
				t.Errorf("receivers %04b (dropped %v), want %04b (dropped %v)", got, dropped, tc.want, tc.dropped)
			}
		})
	}
}

func TestRuleMatchesMessageComponentAndHostAsUnanchoredRegexps(t *testing.T) {
	c, err := ParseConfig("r.yaml", []byte(`
route:
  match:
    - message: "OOM"
      component: "kubelet"
      host: "node-[0-9]+"
      apiVersion: "^v1$"
      receiver: a
receivers: [{name: a, stdout: {}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	o := occ("u", 1, "ns")
	o.Message, o.ReportingController, o.ReportingInstance, o.Regarding.APIVersion = "container was OOMKilled", "kubelet", "node-12", "v1"
	if set, _ := c.Route.receivers(o); set != 1 {
		t.Errorf("matching occurrence routed to %b", set)
	}
	o.ReportingInstance = "master"
	if set, _ := c.Route.receivers(o); set != 0 {
		t.Errorf("occurrence from another host routed to %b", set)
	}
}

// kubernetes-event-exporter decodes a null label value (labels: {canary:
// ~}) as "", which matches any value: the rule asks only that the label
// be present.
func TestNullLabelValueMeansPresentWithAnyValue(t *testing.T) {
	c := parseStdoutRule(t, "", `
      labels:
        canary: ~
        track: null
      annotations: {owner: }
`)
	r := c.Route.Match[0]
	if !r.Labels.match(map[string]string{"canary": "true", "track": "stable"}) || !r.Annotations.match(map[string]string{"owner": ""}) {
		t.Errorf("labels {canary: ~, track: null} or annotations {owner: } do not match present labels (patterns %v)", r.Labels.pats)
	}
	if r.Labels.match(map[string]string{"canary": "true"}) {
		t.Error("labels {canary: ~, track: null} match without track")
	}
}

// Merge keys apply to labels and annotations conditions too: a merged
// condition was taken as a label literally named "<<".
func TestLabelsMergeKeyIsMerged(t *testing.T) {
	c := parseStdoutRule(t, `
prod: &prod
  env: "^prod$"
  app: never
`, `
      labels:
        <<: *prod
        app: web
`)
	m := c.Route.Match[0].Labels
	if slices.Contains(m.names, "<<") || len(m.names) != 2 {
		t.Fatalf("labels condition names %v, want env and app", m.names)
	}
	if !m.match(map[string]string{"env": "prod", "app": "web"}) || m.match(map[string]string{"env": "dev", "app": "web"}) {
		t.Errorf("labels condition %v %v does not apply env: ^prod$ and app: web", m.names, m.pats)
	}
}

// parseStdoutRule parses a configuration of one receiver, s, printing to
// stdout, matched by the root route's rule "- receiver: s" followed by
// rule's lines (indented as they go there), after the top-level lines pre.
func parseStdoutRule(t *testing.T, pre, rule string) *Config {
	t.Helper()
	return parseOK(t, pre+"receivers:\n  - name: s\n    stdout: {}\nroute:\n  match:\n    - receiver: s"+rule)
}

// kubernetes-event-exporter v1.6.1 sends an event to a receiver once per
// rule that selects it (Route.ProcessEvent calls SendEvent for each); here
// a receiver gets each occurrence once, whatever the depth or the number
// of rules naming it, and a drop rule deeper down takes back nothing
// selected above it.
func TestReceiverSelectedAtSeveralLevelsGetsTheOccurrenceOnce(t *testing.T) {
	c := parseOK(t, `
route:
  drop: [{namespace: "^kube-system$"}]
  match: [{receiver: a}]
  routes:
    - match: [{receiver: a}, {type: "^Warning$"}]
      routes:
        - drop: [{reason: "^Pulled$"}]
          match: [{receiver: b}]
          routes:
            - drop: [{message: ignore}]
              match: [{receiver: a}, {receiver: b}]
receivers: [{name: a, stdout: {}}, {name: b, stdout: {}}]
`)
	a, b := &memSink{}, &memSink{}
	c.Receivers[0].Stdout, c.Receivers[0].Sink = nil, a
	c.Receivers[1].Stdout, c.Receivers[1].Sink = nil, b
	p, err := NewPipeline(c, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(uid, ns, typ, reason, msg string) *Occurrence {
		o := occ(uid, 1, ns)
		o.Type, o.Reason, o.Message = typ, reason, msg
		return o
	}
	for _, o := range []*Occurrence{
		mk("deep", "app", "Warning", "BackOff", "m"),         // a at three levels, b at two
		mk("pulled", "app", "Warning", "Pulled", "m"),        // dropped at level 3: a from above only
		mk("ignored", "app", "Warning", "BackOff", "ignore"), // dropped at level 4: a, b from above
		mk("system", "kube-system", "Warning", "BackOff", "m"),
	} {
		if err := p.Occurred(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := a.stored(), []string{"deep/1", "pulled/1", "ignored/1"}; !slices.Equal(got, want) {
		t.Errorf("a stored %v, want %v", got, want)
	}
	if got, want := b.stored(), []string{"deep/1", "ignored/1"}; !slices.Equal(got, want) {
		t.Errorf("b stored %v, want %v", got, want)
	}
	if st := p.PipelineStats(); st.DroppedByRule != 1 {
		t.Errorf("dropped by rule %d, want 1 (kube-system)", st.DroppedByRule)
	}
}

// An empty drop rule (- ~, or a - whose fields are all commented out) is a
// rule with nothing to check: it matches every event, so its route drops
// everything, as kubernetes-event-exporter's does (it was left out: the
// route dropped nothing), with a warning.
func TestAnEmptyDropRuleDropsEveryEventAsTheirs(t *testing.T) {
	for _, drop := range []string{"    - ~\n", "    -\n", "    - # namespace: \"^kube-system$\"\n"} {
		c, err := ParseConfig("r.yaml", []byte("route:\n  drop:\n"+drop+"  match:\n    - receiver: a\nreceivers:\n  - {name: a, stdout: {}}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got, dropped := c.Route.receivers(occ("u", 1, "app")); got != 0 || !dropped {
			t.Errorf("drop %q: receivers %b (dropped %v), want none, dropped", drop, got, dropped)
		}
		if !slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "empty drop rule") }) {
			t.Errorf("drop %q: no warning in %q", drop, c.Warnings)
		}
	}
}
