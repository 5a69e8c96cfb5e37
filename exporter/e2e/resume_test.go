//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter"
	"github.com/fanout-go/fanout/k8s/apiservertest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// resumeConfig writes a configuration with a file sink and a lossless
// webhook sink, and returns the child's arguments (metrics on addr).
func resumeConfig(t *testing.T, ns, dir, hookURL, addr string) []string {
	t.Helper()
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`
namespace: %s
checkpoint: {file: %s, interval: 100ms}
route:
  match: [{receiver: file}, {receiver: hook}]
receivers:
  - name: file
    file: {path: %s}
  - name: hook
    webhook: {endpoint: %s}
    queue: {strategy: Wait}
    retry: {maxTries: 1000, initialBackoff: 50ms, maxBackoff: 200ms}
`, ns, filepath.Join(dir, "ck.json"), filepath.Join(dir, "events.jsonl"), hookURL)), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--config", config, "--listen", addr}
}

// resumeSetup makes a namespace, a directory, a webhook and a metrics
// address for a test of the exporter's restarts, and returns them with the
// child's arguments.
func resumeSetup(t *testing.T, name string) (client kubernetes.Interface, ns, dir string, hook *webhook, addr string, args []string) {
	t.Helper()
	cfg, client := cluster(t)
	ns = apiservertest.Namespace(t, client, name)
	dir = t.TempDir()
	hook = newWebhook(t, nil)
	addr = freeAddr(t)
	args = append(resumeConfig(t, ns, dir, hook.URL, addr), "--kubeconfig", kubeconfig(t, cfg))
	return client, ns, dir, hook, addr, args
}

// freeAddr returns a loopback address with a free port.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// raiseTo raises the count of events [0, n) in ns one by one, from their
// current count to count, and adds the key of every raise to keys.
func raiseTo(t *testing.T, client kubernetes.Interface, ns string, n int, count int32, keys map[string]bool) {
	t.Helper()
	for i := range n {
		e, err := client.CoreV1().Events(ns).Get(t.Context(), fmt.Sprintf("ev-%05d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for e.Count < count {
			e.Count++
			e.LastTimestamp = metav1.Now()
			if e, err = client.CoreV1().Events(ns).Update(t.Context(), e, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			keys[exporter.Key(string(e.UID), e.Count)] = true
		}
	}
}

// childMetric returns the value of a sample of the child's /metrics.
func childMetric(t *testing.T, addr, sample string) float64 {
	t.Helper()
	for line := range strings.Lines(httpGet(t, "http://"+addr+"/metrics")) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no sample %s in the metrics", sample)
	return 0
}

// waitChildReady waits until the child at addr answers /readyz.
func waitChildReady(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			if resp, err := httpClient.Get("http://" + addr + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the exporter was not ready within a minute")
		}
	}
}

func TestCountRaisesMadeWhileKilledAllReachEverySinkAfterTheRestart(t *testing.T) {
	client, ns, dir, hook, addr, args := resumeSetup(t, "resume")
	const n = 40
	first := startChild(t, args...)
	waitChildReady(t, addr)
	want, err := createEvents(t.Context(), client, ns, 0, n, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	<-hook.set.reach(n)
	// The webhook lags behind the file at the kill: it misses the raises
	// to 2, which the file stores.
	hook.setDown(true)
	raiseTo(t, client, ns, n, 2, want)
	waitFileKeys(t, filepath.Join(dir, "events.jsonl"), 2*n)
	if err := first.stop(t, syscall.SIGKILL); err == nil {
		t.Fatal("the killed exporter exited cleanly")
	}
	raiseTo(t, client, ns, n, 5, want) // three raises per event while down
	hook.setDown(false)
	second := startChild(t, args...)
	hook.set.setWant(want)
	hook.set.wait(t, "webhook", 2*time.Minute)
	waitFileKeys(t, filepath.Join(dir, "events.jsonl"), len(want))
	if v := childMetric(t, addr, "fanout_eventer_source_relists_total"); v != 0 {
		t.Errorf("%v relists after the restart, want 0 (resumed from the checkpoint)", v)
	}
	if v := childMetric(t, addr, "fanout_eventer_source_lists_total"); v != 0 {
		t.Errorf("%v lists after the restart, want 0", v)
	}
	if err := second.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	fileKeys(t, filepath.Join(dir, "events.jsonl"), want).check(t, "file", false)
	hook.set.check(t, "webhook", true)
	t.Logf("%d occurrences, %d of them count raises made while the exporter was killed, all in both sinks", len(want), 3*n)
}

// waitFileKeys waits until the file sink's file holds n distinct keys.
func waitFileKeys(t *testing.T, path string, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		s := fileKeys(t, path, nil)
		s.mu.Lock()
		got := len(s.keys)
		s.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d keys after a minute, want %d", path, got, n)
		}
	}
}

func TestCheckpointTooOldForTheWatchMakesAListAndCountsCollapsedRaises(t *testing.T) {
	client, ns, dir, hook, addr, args := resumeSetup(t, "tooold")
	const n = 20
	if _, err := createEvents(t.Context(), client, ns, 0, n, 4, 0); err != nil {
		t.Fatal(err)
	}
	// The checkpoint of an exporter that forwarded count 1 of every event,
	// then stopped; while it is down, the counts rise to 4 and etcd
	// compacts its history past the checkpoint's resource version.
	l, err := client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ck := exporter.Checkpoint{Version: 1, ResourceVersion: l.ResourceVersion, Counts: map[string]int32{}}
	for _, e := range l.Items {
		ck.Counts[string(e.UID)] = 1
	}
	raiseTo(t, client, ns, n, 4, map[string]bool{})
	compact(t, client, ns)
	want := map[string]bool{}
	for _, e := range l.Items {
		want[exporter.Key(string(e.UID), 4)] = true
	}
	b, _ := json.Marshal(ck)
	if err := os.WriteFile(filepath.Join(dir, "ck.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	hook.set.setWant(want)
	child := startChild(t, args...)
	hook.set.wait(t, "webhook", time.Minute)
	waitChildReady(t, addr)
	if v := childMetric(t, addr, "fanout_eventer_source_relists_total"); v != 1 {
		t.Errorf("%v relists, want 1", v)
	}
	if v := childMetric(t, addr, "fanout_eventer_source_collapsed_raises_total"); v != 2*n {
		t.Errorf("%v collapsed raises, want %d (counts 2 and 3 of every event)", v, 2*n)
	}
	if err := child.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	hook.set.check(t, "webhook", false)
	log, _ := os.ReadFile(child.log)
	if !strings.Contains(string(log), "collapsedRaises=40") {
		t.Errorf("the log does not say how many raises collapsed:\n%s", log)
	}
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// compact compacts etcd's history up to the current resource version, as
// kube-apiserver does every five minutes, so that no watch can start from
// an older one.
func compact(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	l, err := client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"revision": %q, "physical": true}`, l.ResourceVersion)
	resp, err := httpClient.Post(apiservertest.Shared(t).EtcdURL()+"/v3/kv/compaction", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("etcd compaction: %s: %s", resp.Status, b)
	}
}
