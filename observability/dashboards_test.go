package observability_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fanout-go/fanout/observability"
	"github.com/fanout-go/fanout/observability/internal/promtest"
)

// dashboard is what the tests read of a Grafana dashboard.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type variable struct {
	Name       string     `json:"name"`
	Type       string     `json:"type"`
	Query      any        `json:"query"`
	Datasource datasource `json:"datasource"`
}

type panel struct {
	ID          int        `json:"id"`
	Type        string     `json:"type"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	Datasource  datasource `json:"datasource"`
	Targets     []struct {
		Expr         string     `json:"expr"`
		RefID        string     `json:"refId"`
		LegendFormat string     `json:"legendFormat"`
		Datasource   datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// query is a query of a dashboard and where it is.
type query struct{ where, expr string }

// dashboardFiles are the dashboards of the repository.
var dashboardFiles = []string{"grafana/fanout.json", "grafana/fanout-eventer.json"}

// loadDashboard reads the dashboard at path in [observability.FS].
func loadDashboard(t *testing.T, path string) dashboard {
	t.Helper()
	b, err := fs.ReadFile(observability.FS, path)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return d
}

// panels returns every panel, those of rows included.
func (d dashboard) panels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// variableNames returns the names of the dashboard's variables.
func (d dashboard) variableNames() []string {
	var out []string
	for _, v := range d.Templating.List {
		out = append(out, v.Name)
	}
	return out
}

// queries returns every panel's and every query variable's query.
func (d dashboard) queries() []query {
	var out []query
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := v.Query
		if m, ok := q.(map[string]any); ok {
			q = m["query"]
		}
		out = append(out, query{"variable " + v.Name, fmt.Sprint(q)})
	}
	for _, p := range d.panels() {
		for _, tg := range p.Targets {
			out = append(out, query{fmt.Sprintf("panel %d %q %s", p.ID, p.Title, tg.RefID), tg.Expr})
		}
	}
	return out
}

// Every panel but a row has a title, a description and a query on the
// dashboard's data source variable; ids are unique; the queries use only
// the dashboard's variables.
func TestDashboardsQueryTheirDataSourceInEveryPanel(t *testing.T) {
	for _, path := range dashboardFiles {
		d := loadDashboard(t, path)
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: no uid or title", path)
		}
		vars := map[string]bool{"__rate_interval": true}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
		}
		if !vars["datasource"] {
			t.Errorf("%s: no datasource variable", path)
		}
		ids := map[int]bool{}
		for _, p := range d.panels() {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d twice", path, p.ID)
			}
			ids[p.ID] = true
			if p.Type == "row" {
				continue
			}
			if p.Title == "" || p.Description == "" || len(p.Targets) == 0 || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: panel %d %q: want a title, a description, queries and the datasource variable", path, p.ID, p.Title)
			}
			for _, tg := range p.Targets {
				checkVariables(t, path, p.Title, tg.Expr, vars)
			}
		}
	}
}

// checkVariables fails t if expr uses a variable the dashboard does not
// have.
func checkVariables(t *testing.T, path, title, expr string, vars map[string]bool) {
	t.Helper()
	if strings.TrimSpace(expr) == "" {
		t.Errorf("%s: panel %q: an empty query", path, title)
	}
	for i := strings.Index(expr, "$"); i >= 0; i = strings.Index(expr, "$") {
		expr = expr[i+1:]
		name := strings.TrimLeft(expr, "{")
		end := strings.IndexFunc(name, func(r rune) bool { return r != '_' && !('a' <= r && r <= 'z') && !('0' <= r && r <= '9') })
		if end < 0 {
			end = len(name)
		}
		if !vars[name[:end]] {
			t.Errorf("%s: panel %q uses $%s, which the dashboard does not define", path, title, name[:end])
		}
	}
}

// exprOf returns the first query of the panel titled title, as Grafana
// sends it for the test's data: $job and $instance match all,
// $__rate_interval is 1m.
func exprOf(t *testing.T, d dashboard, title string) string {
	t.Helper()
	for _, p := range d.panels() {
		if p.Title == title && len(p.Targets) > 0 {
			r := strings.NewReplacer(`"$job"`, `".*"`, `"$instance"`, `".*"`, `"$sink"`, `".*"`, "$__rate_interval", "1m")
			return r.Replace(p.Targets[0].Expr)
		}
	}
	t.Fatalf("no panel %q", title)
	return ""
}

// descriptionOf returns the description of fanout.json's panel titled
// title.
func descriptionOf(t *testing.T, title string) string {
	t.Helper()
	for _, p := range loadDashboard(t, "grafana/fanout.json").panels() {
		if p.Title == title {
			return p.Description
		}
	}
	t.Fatalf("no panel %q", title)
	return ""
}

// runPromtoolTest runs `promtool test rules` on the test file body; it
// skips t without promtool.
func runPromtoolTest(t *testing.T, body string) {
	t.Helper()
	_, promtool, err := promtest.Binaries()
	if err != nil {
		t.Skip(err)
	}
	f := filepath.Join(t.TempDir(), "test.yaml")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "test", "rules", f).CombinedOutput()
	if err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}

// Watcher IDs are per broadcaster, and a recorder names its runners "sink
// <type>" or "handler": the watchers #1 of two broadcasters (told apart by
// a constant label, broadcaster="...") and two runners of one name are
// different series, which the per-watcher and per-runner panels keep
// apart, with every label that tells them apart.
func TestPerWatcherAndRunnerPanelsKeepEveryIdentifyingLabel(t *testing.T) {
	d := loadDashboard(t, "grafana/fanout.json")
	runPromtoolTest(t, `
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'fanout_watcher_values_total{job="app", instance="i:1", broadcaster="orders", watcher_id="1", watcher="audit", result="delivered"}'
        values: '0+60x20'
      - series: 'fanout_watcher_values_total{job="app", instance="i:1", broadcaster="payments", watcher_id="1", watcher="audit", result="delivered"}'
        values: '0+120x20'
      - series: 'fanout_runner_values_total{job="app", instance="i:1", recorder="rec", watcher_id="1", watcher="sink *main.webhook", result="written"}'
        values: '0+60x20'
      - series: 'fanout_runner_values_total{job="app", instance="i:1", recorder="rec", watcher_id="2", watcher="sink *main.webhook", result="written"}'
        values: '0+120x20'
      - series: 'fanout_runner_dropped_total{job="app", instance="i:1", recorder="rec", watcher_id="1", watcher="sink *main.webhook", reason="rejected"}'
        values: '0+60x20'
      - series: 'fanout_runner_dropped_total{job="app", instance="i:1", recorder="rec", watcher_id="2", watcher="sink *main.webhook", reason="rejected"}'
        values: '0+120x20'
    promql_expr_test:
      - expr: '`+exprOf(t, d, "Watcher deliveries /s")+`'
        eval_time: 10m
        exp_samples:
          - labels: '{job="app", instance="i:1", broadcaster="orders", watcher_id="1", watcher="audit"}'
            value: 1
          - labels: '{job="app", instance="i:1", broadcaster="payments", watcher_id="1", watcher="audit"}'
            value: 2
      - expr: '`+exprOf(t, d, "Runner writes /s")+`'
        eval_time: 10m
        exp_samples:
          - labels: '{job="app", instance="i:1", recorder="rec", watcher_id="1", watcher="sink *main.webhook", result="written"}'
            value: 1
          - labels: '{job="app", instance="i:1", recorder="rec", watcher_id="2", watcher="sink *main.webhook", result="written"}'
            value: 2
      - expr: '`+exprOf(t, d, "Not written /s by reason")+`'
        eval_time: 10m
        exp_samples:
          - labels: '{job="app", instance="i:1", recorder="rec", watcher_id="1", watcher="sink *main.webhook", reason="rejected"}'
            value: 1
          - labels: '{job="app", instance="i:1", recorder="rec", watcher_id="2", watcher="sink *main.webhook", reason="rejected"}'
            value: 2
`)
}

// No per-watcher, per-runner or per-recorder panel names its series with a
// legend format: the constant labels that tell broadcasters and recorders
// apart are the program's own, and only Grafana's default legend shows
// them, whatever they are.
func TestPerWatcherAndRunnerPanelsShowEveryLabelInTheirLegend(t *testing.T) {
	for _, p := range loadDashboard(t, "grafana/fanout.json").panels() {
		for _, tg := range p.Targets {
			if tg.LegendFormat != "" && perWatcherRE.MatchString(tg.Expr) {
				t.Errorf("panel %q: legend %q names only some of the labels", p.Title, tg.LegendFormat)
			}
		}
	}
}

// perWatcherRE matches the metrics of a watcher, a runner or a recorder.
var perWatcherRE = regexp.MustCompile(`fanout_(watcher|runner|recorder)_`)
