package exporter

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const theirs = "testdata/kubernetes-event-exporter/"

func TestTheirExampleConfigsLoadUnchangedWithWarningsOnly(t *testing.T) {
	t.Setenv("ELASTIC_API_KEY", "key")
	t.Setenv("ALERTS_URL", "https://alerts.example/hook")
	files, err := filepath.Glob(theirs + "*.yaml")
	if err != nil || len(files) < 20 {
		t.Fatalf("%d example files: %v", len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := LoadConfig(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.Warnings {
				if !strings.HasPrefix(w, "line ") && !strings.HasPrefix(w, "receivers:") && !strings.HasPrefix(w, "logLevel:") {
					t.Errorf("warning without a line: %q", w)
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

func TestTheirConfigExampleKeepsItsSupportedSinksAndSkipsTheRest(t *testing.T) {
	t.Setenv("ELASTIC_API_KEY", "key")
	c, err := LoadConfig(theirs + "config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := receiverNames(c); !slices.Equal(got, []string{"dump", "opensearch-dump", "slack", "pipe", "kafka", "eventbridge", "firehose"}) {
		t.Fatalf("receivers %v, want dump, opensearch-dump, slack, pipe, kafka, eventbridge and firehose", got)
	}
	if c.Receivers[0].Elasticsearch.APIKey != "key" || c.Receivers[3].Webhook.Layout == nil {
		t.Errorf("elasticsearch %+v, webhook %+v", c.Receivers[0].Elasticsearch, c.Receivers[3].Webhook)
	}
	if c.KubeQPS != 60 || c.KubeBurst != 60 || c.LogLevel != "debug" || c.LogFormat != "json" {
		t.Errorf("kubeQPS %v, kubeBurst %d, log %s/%s", c.KubeQPS, c.KubeBurst, c.LogLevel, c.LogFormat)
	}
	wantWarnings(t, c, "line 4: maxEventAgeSeconds: ignored", "unknown field streamName: ignored",
		`receiver "alert": the opsgenie sink`, `invalid regular expression "*beta*" never matches`)
	o := occ("u", 9, "prod")
	o.Type = "Warning"
	if set, _ := c.Route.receivers(o); set != 0b1001001 {
		t.Errorf("warning routed to %b, want dump, the webhook and firehose (1001001)", set)
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
	wantWarnings(t, c, "metricsNamePrefix: ignored")
	if c.OmitLookup || c.CacheSize != 4096 {
		t.Errorf("omitLookup %v, cacheSize %d: want their lookup, with their cache size", c.OmitLookup, c.CacheSize)
	}
}
