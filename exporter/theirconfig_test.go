package exporter

import (
	"path/filepath"
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

func TestTheirConfigExampleKeepsItsWebhookLayoutAndSkipsTheRest(t *testing.T) {
	t.Setenv("ELASTIC_API_KEY", "key")
	c, err := LoadConfig(theirs + "config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Receivers) != 1 || c.Receivers[0].Name != "pipe" || c.Receivers[0].Webhook.Layout == nil {
		t.Fatalf("receivers %v, want the webhook pipe with its layout", c.Receivers)
	}
	if c.KubeQPS != 60 || c.KubeBurst != 60 || c.LogLevel != "debug" || c.LogFormat != "json" {
		t.Errorf("kubeQPS %v, kubeBurst %d, log %s/%s", c.KubeQPS, c.KubeBurst, c.LogLevel, c.LogFormat)
	}
	wantWarnings(t, c, "line 4: maxEventAgeSeconds: ignored", "unknown field streamName: ignored",
		`receiver "dump": the elasticsearch sink`, `invalid regular expression "*beta*" never matches`)
	o := occ("u", 9, "prod")
	o.Type = "Warning"
	if set, _ := c.Route.receivers(o); set != 1 {
		t.Errorf("warning routed to %b, want the webhook", set)
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
	if len(c.Receivers) != 2 {
		t.Errorf("%d receivers, want elasticsearch skipped", len(c.Receivers))
	}
	wantWarnings(t, c, "metricsNamePrefix: ignored", `receiver "es"`)
	if c.OmitLookup || c.CacheSize != 4096 {
		t.Errorf("omitLookup %v, cacheSize %d: want their lookup, with their cache size", c.OmitLookup, c.CacheSize)
	}
}
