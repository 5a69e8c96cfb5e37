package exporter

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const theirs = "testdata/kubernetes-event-exporter/"

func TestTheirExampleConfigsLoadUnchangedWithWarningsOnly(t *testing.T) {
	t.Setenv("ELASTIC_API_KEY", "key")
	t.Setenv("ALERTS_URL", "https://alerts.example/hook")
	files, err := filepath.Glob(theirs + "*.yaml")
	if err != nil || len(files) < 20 {
		t.Fatalf("%d example files: %v", len(files), err)
	}
	// Examples that kubernetes-event-exporter itself refuses at start,
	// with what is missing.
	refused := map[string]string{"20-bigquery.yaml": "bigquery.project is required",
		"config.example.yaml": "opsgenie.apiKey is required"}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := LoadConfig(f)
			if want, ok := refused[filepath.Base(f)]; ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("err %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.Warnings {
				if !strings.HasPrefix(w, "line ") && !strings.HasPrefix(w, "receivers:") && !strings.HasPrefix(w, "logLevel:") &&
					!strings.HasPrefix(w, "route: no rule names a receiver") { // their README's examples without a route
					t.Errorf("warning without a line: %q", w)
				}
				// Every key and receiver of theirs takes effect: only a
				// key outside their schema is ignored (as there).
				if strings.Contains(w, "not supported") || strings.Contains(w, "skipped") ||
					strings.Contains(w, "ignored") && !strings.Contains(w, "unknown field") {
					t.Errorf("warning %q: a key or receiver of theirs without effect", w)
				}
			}
		})
	}
}

// receiverNames returns the names of c's receivers, in order.
func receiverNames(c *Config) []string {
	var names []string
	for _, r := range c.Receivers {
		names = append(names, r.Name)
	}
	return names
}

// Their config.example.yaml has an opsgenie receiver without an API key,
// with which they do not start; given one, it loads.
func TestTheirConfigExampleLoadsEveryReceiver(t *testing.T) {
	t.Setenv("ELASTIC_API_KEY", "key")
	b, err := os.ReadFile(theirs + "config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig("config.example.yaml", []byte(os.ExpandEnv(strings.Replace(string(b), `apiKey: ""`, `apiKey: "k"`, 1))))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"dump", "opensearch-dump", "alert", "slack", "pipe", "kafka", "pubsub", "eventbridge", "syslog", "firehose"}
	if got := receiverNames(c); !slices.Equal(got, want) {
		t.Fatalf("receivers %v, want %v", got, want)
	}
	if c.Receivers[0].Elasticsearch.APIKey != "key" || c.Receivers[4].Webhook.Layout == nil {
		t.Errorf("elasticsearch %+v, webhook %+v", c.Receivers[0].Elasticsearch, c.Receivers[4].Webhook)
	}
	if c.KubeQPS != 60 || c.KubeBurst != 60 || c.LogLevel != "debug" || c.LogFormat != "json" {
		t.Errorf("kubeQPS %v, kubeBurst %d, log %s/%s", c.KubeQPS, c.KubeBurst, c.LogLevel, c.LogFormat)
	}
	wantWarnings(t, c, "unknown field streamName: ignored", `invalid regular expression "*beta*" never matches`)
	o := occ("u", 9, "prod")
	o.Type = "Warning"
	if set, _ := c.Route.receivers(o); set != 0b1000010101 {
		t.Errorf("warning routed to %b, want dump, alert, the webhook and firehose (1000010101)", set)
	}
}

func TestMigratedConfigMapsEnvClusterLeaderElectionPipeAndWebhook(t *testing.T) {
	t.Setenv("CLUSTER_NAME", "prod-eu")
	t.Setenv("ALERTS_URL", "https://alerts.example/hook")
	t.Setenv("ALERTS_TOKEN", "s3cret")
	c, err := LoadConfig(theirs + "migrated.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stdout, alerts := c.Receivers[0], c.Receivers[1]
	if c.ClusterName != "prod-eu" || !c.LeaderElection.Enabled || c.LeaderElection.LeaderElectionID != "kubernetes-event-exporter" ||
		stdout.Pipe.Path != "/dev/stdout" || !stdout.Pipe.DeDot.V || stdout.Pipe.Layout == nil ||
		alerts.Webhook.Headers["Authorization"] != "Bearer s3cret" || alerts.Webhook.TLS.ServerName != "alerts.internal" {
		t.Errorf("config %+v", c)
	}
	if es := c.Receivers[2].Elasticsearch; es == nil || es.Index != "kube-events" {
		t.Errorf("elasticsearch %+v", es)
	}
	if p, ok := c.metricsPrefix(); !ok || p != "event_exporter_" || c.MaxEventAge() != time.Minute {
		t.Errorf("metricsNamePrefix %q (set %v), maxEventAge %v: want event_exporter_ and 60s", p, ok, c.MaxEventAge())
	}
	for _, w := range c.Warnings {
		if strings.Contains(w, "ignored") && !strings.Contains(w, "unknown field") {
			t.Errorf("warning %q: every key of theirs takes effect", w)
		}
	}
	if c.OmitLookup || c.CacheSize != 4096 {
		t.Errorf("omitLookup %v, cacheSize %d: want their lookup, with their cache size", c.OmitLookup, c.CacheSize)
	}
}
