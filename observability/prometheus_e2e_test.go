//go:build e2e

package observability_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/fanout-go/fanout/observability/internal/promtest"
)

// settle is how long a test waits for Prometheus to have scraped enough
// and evaluated the rules: every query returns data after two scrapes,
// every rule is pending after one evaluation.
const settle = 90 * time.Second

// rateInterval is what the tests put for Grafana's $__rate_interval, which
// Grafana makes at least four scrape intervals.
const rateInterval = "1m"

// labelValuesRE matches a variable query label_values(selector, label).
var labelValuesRE = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

// resolve returns the query with Grafana's variables replaced: the
// dashboard's own with what matches every value (as "All" does),
// $__rate_interval with rateInterval.
func resolve(expr string, vars []string) string {
	// The longest names first, so that $job does not eat into $jobs.
	slices.SortFunc(vars, func(a, b string) int { return len(b) - len(a) })
	for _, v := range vars {
		expr = strings.ReplaceAll(expr, "${"+v+"}", ".+")
		expr = strings.ReplaceAll(expr, "$"+v, ".+")
	}
	return strings.ReplaceAll(expr, "$__rate_interval", rateInterval)
}

// checkDashboard waits until each of the dashboard's panel queries and
// variable queries returns data from prom, and fails t naming those that
// still return none after settle.
func checkDashboard(t *testing.T, prom *promtest.Server, path string) {
	t.Helper()
	d := loadDashboard(t, path)
	vars := d.variableNames()
	var pending []string
	for i := time.Now(); ; {
		pending = pending[:0]
		for _, q := range d.queries() {
			if n, err := count(prom, resolve(q.expr, slices.Clone(vars))); err != nil || n == 0 {
				pending = append(pending, fmt.Sprintf("%s: %s: %d series, %v", q.where, q.expr, n, err))
			}
		}
		if len(pending) == 0 || time.Since(i) > settle {
			break
		}
		time.Sleep(time.Second)
	}
	for _, p := range pending {
		t.Errorf("%s: no data: %s", path, p)
	}
}

// count runs a panel's query (an instant query) or a variable's
// label_values (the label values API, as Grafana does) and returns how
// many series or values it gave.
func count(prom *promtest.Server, expr string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m := labelValuesRE.FindStringSubmatch(expr); m != nil {
		vs, _, _, err := prom.API.LabelValues(ctx, m[2], []string{m[1]}, time.Now().Add(-time.Hour), time.Now())
		return len(vs), err
	}
	v, _, _, err := prom.API.Query(ctx, expr, time.Now())
	if err != nil {
		return 0, err
	}
	switch v := v.(type) {
	case model.Vector:
		return len(v), nil
	case model.Matrix:
		return len(v), nil
	case *model.Scalar:
		return 1, nil
	}
	return 0, fmt.Errorf("unexpected result %v", v.Type())
}

// wantAlert is an alert expected active (pending or firing), with labels
// it must carry among its own.
type wantAlert struct {
	name   string
	labels model.LabelSet
}

func (w wantAlert) String() string { return w.name + w.labels.String() }

// matches reports whether the active alert name with labels is w.
func (w wantAlert) matches(name string, labels model.LabelSet) bool {
	if name != w.name {
		return false
	}
	for k, v := range w.labels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkRules checks the rule files with promtool, then waits until
// prom's rules are all healthy and its active alerts are exactly want:
// each wanted one active, none active that is not wanted. It fails t
// with what differs after settle.
func checkRules(t *testing.T, prom *promtest.Server, want []wantAlert, files ...string) {
	t.Helper()
	_, promtool, err := promtest.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, append([]string{"check", "rules"}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	var problems []string
	for i := time.Now(); ; {
		problems = ruleProblems(t, prom, want)
		if len(problems) == 0 || time.Since(i) > settle {
			break
		}
		time.Sleep(time.Second)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		logInactiveInputs(t, prom, want)
	}
}

// metricRE matches the names of fanout's metrics in a rule's expression.
var metricRE = regexp.MustCompile(`\bfanout_[a-z0-9_]+`)

// logInactiveInputs logs, for each alert of want that is not active, the
// last three minutes of every fanout series its rule reads, narrowed to
// the alert's labels: what a failure needs to be told from a race of
// the test's (a flake under CI load left only "not active" to go on).
func logInactiveInputs(t *testing.T, prom *promtest.Server, want []wantAlert) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := prom.API.Rules(ctx, nil)
	if err != nil {
		t.Logf("rules: %v", err)
		return
	}
	for _, g := range res.Groups {
		for _, r := range g.Rules {
			ar, ok := r.(v1.AlertingRule)
			if !ok {
				continue
			}
			for _, w := range want {
				if w.name != ar.Name || slices.ContainsFunc(ar.Alerts, func(a *v1.Alert) bool { return w.matches(ar.Name, a.Labels) }) {
					continue
				}
				for _, m := range slices.Compact(slices.Sorted(slices.Values(metricRE.FindAllString(ar.Query, -1)))) {
					q := m + selector(w.labels) + "[3m]"
					v, _, _, err := prom.API.Query(ctx, q, time.Now())
					t.Logf("inactive %s: %s: %s (err %v)", w, q, summary(v), err)
				}
			}
		}
	}
}

// summary describes each series of a range query's result by its first
// and last samples and the values it went through.
func summary(v model.Value) string {
	m, ok := v.(model.Matrix)
	if !ok {
		return fmt.Sprint(v)
	}
	var out []string
	for _, ss := range m {
		if len(ss.Values) == 0 {
			continue
		}
		first, last := ss.Values[0], ss.Values[len(ss.Values)-1]
		var seen []string
		for _, p := range ss.Values {
			if v := p.Value.String(); len(seen) == 0 || seen[len(seen)-1] != v {
				seen = append(seen, v)
			}
		}
		out = append(out, fmt.Sprintf("%s: %d samples %s..%s, values %s", ss.Metric, len(ss.Values),
			first.Timestamp.Time().Format(time.TimeOnly), last.Timestamp.Time().Format(time.TimeOnly), strings.Join(seen, " → ")))
	}
	return fmt.Sprintf("%d series; %s", len(m), strings.Join(out, "; "))
}

// selector returns labels as a PromQL label matcher, {} for none.
func selector(labels model.LabelSet) string {
	var ms []string
	for k, v := range labels {
		ms = append(ms, fmt.Sprintf("%s=%q", k, v))
	}
	slices.Sort(ms)
	return "{" + strings.Join(ms, ",") + "}"
}

// The failure log of checkRules: a series is told by its first and last
// samples and the values it went through, repeats collapsed.
func TestSummaryGivesEachSeriesItsSpanAndValues(t *testing.T) {
	at := func(s int64) model.Time { return model.TimeFromUnix(s) }
	m := model.Matrix{{Metric: model.Metric{"__name__": "fanout_x", "instance": "a"},
		Values: []model.SamplePair{{Timestamp: at(0), Value: 4}, {Timestamp: at(1), Value: 4}, {Timestamp: at(2), Value: 5}}}}
	got := summary(m)
	for _, want := range []string{"1 series", `instance="a"`, "3 samples", "values 4 → 5"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary = %q, lacks %q", got, want)
		}
	}
}

func TestSelectorMatchesEveryLabelInOrder(t *testing.T) {
	if got, want := selector(model.LabelSet{"sink": "hook", "instance": "a:1"}), `{instance="a:1",sink="hook"}`; got != want {
		t.Errorf("selector = %s, want %s", got, want)
	}
	if got := selector(nil); got != "{}" {
		t.Errorf("selector(nil) = %s, want {}", got)
	}
}

// ruleProblems returns what differs between prom's rules and want.
func ruleProblems(t *testing.T, prom *promtest.Server, want []wantAlert) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := prom.API.Rules(ctx, nil)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	seen := make([]bool, len(want))
	rules := 0
	for _, g := range res.Groups {
		for _, r := range g.Rules {
			ar, ok := r.(v1.AlertingRule)
			if !ok {
				continue
			}
			rules++
			if ar.Health != v1.RuleHealthGood {
				problems = append(problems, fmt.Sprintf("rule %s: health %q: %s", ar.Name, ar.Health, ar.LastError))
			}
			for _, a := range ar.Alerts {
				i := slices.IndexFunc(want, func(w wantAlert) bool { return w.matches(ar.Name, a.Labels) })
				if i < 0 {
					problems = append(problems, fmt.Sprintf("alert %s%s is %s: not expected", ar.Name, a.Labels, a.State))
					continue
				}
				seen[i] = true
			}
		}
	}
	if rules == 0 {
		problems = append(problems, "no alerting rule loaded")
	}
	for i, ok := range seen {
		if !ok {
			problems = append(problems, fmt.Sprintf("alert %s is not active", want[i]))
		}
	}
	return problems
}

// ruleNames returns the names of the alerting rules in the files, read
// the simple way: each "- alert: Name" line.
func ruleNames(t *testing.T, files ...string) []string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s*- alert:\s*(\S+)\s*$`)
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// checkEveryRuleIsWanted fails t if a rule of the files has no wanted
// alert: each rule must be shown to evaluate as it says.
func checkEveryRuleIsWanted(t *testing.T, want []wantAlert, files ...string) {
	t.Helper()
	names := map[string]bool{}
	for _, w := range want {
		names[w.name] = true
	}
	for _, n := range ruleNames(t, files...) {
		if !names[n] {
			t.Errorf("rule %s is not tested: no alert of it is expected", n)
		}
	}
}
