package observability_test

import (
	"context"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/observability"
)

// runnerReasons returns the reasons of fanout_runner_dropped_total, as a
// recorder's runner exports them.
func runnerReasons(t *testing.T) []string {
	t.Helper()
	r, err := fanout.NewRecorder[int]()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Shutdown(context.Background()) }()
	if _, err := r.StartHandler(func(int) {}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range r.Metrics() {
		for _, l := range m.Labels {
			if m.Name == "fanout_runner_dropped_total" && l.Name == "reason" {
				out = append(out, l.Value)
			}
		}
	}
	return out
}

// The rule and the panel about what runners did not write name only the
// reasons runners export: a sink that panics is counted as rejected.
func TestRunnerDropReasonsNamedAreThoseRunnersExport(t *testing.T) {
	reasons := runnerReasons(t)
	rules, err := fs.ReadFile(observability.FS, "prometheus/fanout-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`fanout_runner_dropped_total\{reason=~"([^"]*)"\}`).FindSubmatch(rules)
	if m == nil {
		t.Fatal("no rule on fanout_runner_dropped_total{reason=~...}")
	}
	for _, r := range strings.Split(string(m[1]), "|") {
		if !slices.Contains(reasons, r) {
			t.Errorf("a rule matches reason %q, which runners never export (%v)", r, reasons)
		}
	}
	desc := descriptionOf(t, "Not written /s by reason")
	for _, r := range []string{"oldest", "timeout", "evicted", "panic", "refused"} {
		if !slices.Contains(reasons, r) && regexp.MustCompile(`\b`+r+`\b`).MatchString(desc) {
			t.Errorf("panel %q names reason %q, which runners never export (%v)", "Not written /s by reason", r, reasons)
		}
	}
}
