//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter"
	"github.com/fanout-go/fanout/k8s/apiservertest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Events last seen 40 minutes ago, which the API server still holds (its
// event TTL is an hour), are not exported at a first start nor after a
// graceful restart: with kubernetes-event-exporter's configuration as it
// is (no checkpoint: its 5 s maxEventAgeSeconds applies at every start),
// and with a checkpoint and maxEventAgeSeconds (the cut-off applies to
// the first start, the checkpoint decides after).
func TestFortyMinuteOldEventsAreNotExportedAtStartNorAfterARestart(t *testing.T) {
	cfg, client := cluster(t)
	for i, tc := range []struct {
		name, extra string
		tooOld      [2]float64 // source_too_old_total of each run
	}{
		{"their configuration", "", [2]float64{3, 3}},
		{"checkpoint and maxEventAgeSeconds", "checkpoint: {file: %s/ck.json, interval: 100ms}\nmaxEventAgeSeconds: 600\n", [2]float64{3, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := apiservertest.Namespace(t, client, fmt.Sprintf("maxage-%d", i))
			dir, addr := t.TempDir(), freeAddr(t)
			old := map[string]bool{}
			for i := range 3 {
				e := event(ns, i, "forty minutes ago")
				e.FirstTimestamp = metav1.NewTime(time.Now().Add(-40 * time.Minute))
				e.LastTimestamp = e.FirstTimestamp
				e, err := client.CoreV1().Events(ns).Create(t.Context(), e, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				old[exporter.Key(string(e.UID), 1)] = true
			}
			extra := tc.extra
			if extra != "" {
				extra = fmt.Sprintf(extra, dir)
			}
			config := filepath.Join(dir, "config.yaml")
			path := filepath.Join(dir, "events.json")
			if err := os.WriteFile(config, []byte(fmt.Sprintf("namespace: %s\n%sroute: {routes: [{match: [{receiver: dump}]}]}\n"+
				"receivers: [{name: dump, file: {path: %s}}]\n", ns, extra, path)), 0o644); err != nil {
				t.Fatal(err)
			}
			for run := range 2 {
				c := startChild(t, "--config", config, "--kubeconfig", kubeconfig(t, cfg), "--listen", addr)
				waitReady(t, addr)
				if got := childMetric(t, addr, "fanout_eventer_source_too_old_total"); got != tc.tooOld[run] {
					t.Errorf("run %d: %v events counted too old, want %v", run, got, tc.tooOld[run])
				}
				e, err := client.CoreV1().Events(ns).Create(t.Context(), event(ns, 10+run, "new"), metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				fresh := map[string]bool{exporter.Key(string(e.UID), 1): true}
				for deadline := time.Now().Add(time.Minute); !fileKeys(t, path, nil).has(fresh); time.Sleep(50 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("run %d: the new event was not exported within a minute", run)
					}
				}
				if err := c.stop(t, syscall.SIGTERM); err != nil {
					t.Fatalf("run %d: exit %v", run, err)
				}
			}
			got := fileKeys(t, path, nil)
			for k := range old {
				if got.keys[k] > 0 {
					t.Errorf("the 40-minute-old occurrence %s was exported", k)
				}
			}
		})
	}
}
