package promtest

import (
	"strings"
	"testing"
	"time"
)

// The targets of one job share one scrape configuration (Prometheus
// refuses a job name twice), in the order of their first target; a job
// without a path scrapes /metrics.
func TestConfigGroupsTheTargetsOfAJob(t *testing.T) {
	got := string(configYAML(Config{Interval: 2 * time.Second, RuleFiles: []string{"/r.yaml"}, Targets: []Target{
		{Job: "a", Addr: "127.0.0.1:1"}, {Job: "b", Addr: "127.0.0.1:2", Path: "/m"}, {Job: "a", Addr: "127.0.0.1:3"}}}))
	for _, want := range []string{
		"scrape_interval: 2s\n  evaluation_interval: 2s\n",
		"rule_files:\n  - \"/r.yaml\"\n",
		"  - job_name: \"a\"\n    metrics_path: \"/metrics\"\n    static_configs:\n      - targets: [\"127.0.0.1:1\", \"127.0.0.1:3\"]\n",
		"  - job_name: \"b\"\n    metrics_path: \"/m\"\n    static_configs:\n      - targets: [\"127.0.0.1:2\"]\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("configuration lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, `"a"`) > strings.Index(got, `"b"`) {
		t.Errorf("jobs out of order:\n%s", got)
	}
}
