package observability_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/fanout-go/fanout/observability"
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
		Expr       string     `json:"expr"`
		RefID      string     `json:"refId"`
		Datasource datasource `json:"datasource"`
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
