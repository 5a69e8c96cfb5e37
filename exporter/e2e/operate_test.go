//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fanout-go/fanout/k8s/apiservertest"
)

// logLines returns the lines of a child's log.
func logLines(t *testing.T, c *child) []string {
	t.Helper()
	b, err := os.ReadFile(c.log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// waitLog waits until the child's log has n lines containing s, and
// returns when the last of them was seen.
func waitLog(t *testing.T, c *child, s string, n int, d time.Duration) time.Time {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		got := 0
		for _, l := range logLines(t, c) {
			if strings.Contains(l, s) {
				got++
			}
		}
		if got >= n {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d log lines with %q after %v, want %d", got, s, d, n)
		}
	}
}

// jsonConfig writes a configuration logging JSON, with a file sink and
// the extra receivers, and returns its path.
func jsonConfig(t *testing.T, ns, dir, extra string) string {
	t.Helper()
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`
namespace: %s
logFormat: json
shutdownTimeout: 1s
route:
  match: [{receiver: file}%s]
receivers:
  - name: file
    file: {path: %s}
%s`, ns, map[bool]string{true: ", {receiver: hook}"}[extra != ""], filepath.Join(dir, "events.jsonl"), extra)), 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

func TestLosingTheAPIServerIsLoggedWithinASecondAndAtEachRetryInJSONOnly(t *testing.T) {
	cfg, client := cluster(t)
	ns := apiservertest.Namespace(t, client, "apiloss")
	dir := t.TempDir()
	// Leader election makes client-go log through klog, which must come
	// out as JSON too.
	c := startChild(t, "--config", jsonConfig(t, ns, dir, ""), "--kubeconfig", kubeconfig(t, cfg), "--listen", "",
		"--leader-elect", "--leader-elect-namespace", ns, "--leader-elect-identity", "e2e")
	waitLog(t, c, `"msg":"listed events"`, 1, time.Minute)
	env := apiservertest.Shared(t)
	t.Cleanup(func() {
		if err := env.StartAPIServer(); err != nil && !strings.Contains(err.Error(), "already running") {
			t.Errorf("restarting kube-apiserver: %v", err)
		}
	})
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if seen := waitLog(t, c, `"msg":"watch`, 1, 5*time.Second); seen.Sub(stopped) > time.Second {
		t.Errorf("the loss of the API server was logged %v after it stopped, want within a second", seen.Sub(stopped))
	}
	waitLog(t, c, `"msg":"watching events failed: retrying"`, 3, 30*time.Second)
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	_ = c.stop(t, syscall.SIGTERM) // it may have lost the Lease meanwhile: either exit is right here
	klogLines := 0
	for _, l := range logLines(t, c) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("not a JSON line in the log: %q", l)
		}
		if rec["logger"] == "client-go" {
			klogLines++
		}
	}
	if klogLines == 0 {
		t.Error("no line of client-go's (klog) in the log: nothing tested that it comes out as JSON")
	}
	t.Logf("%d log lines, %d of them client-go's, all JSON", len(logLines(t, c)), klogLines)
}

func TestSIGTERMExitsZeroUnlessALosslessSinkCouldNotFinish(t *testing.T) {
	cfg, client := cluster(t)
	for _, tc := range []struct {
		strategy string
		want     int
	}{{"DropOldest", 0}, {"Wait", 1}} {
		t.Run(tc.strategy, func(t *testing.T) {
			ns := apiservertest.Namespace(t, client, "sigterm-"+strings.ToLower(tc.strategy))
			dir := t.TempDir()
			hook := newWebhook(t, nil)
			hook.setDown(true)
			config := jsonConfig(t, ns, dir, fmt.Sprintf(`  - name: hook
    webhook: {endpoint: %s}
    queue: {strategy: %s}
    retry: {maxTries: 0, initialBackoff: 50ms, maxBackoff: 200ms}
`, hook.URL, tc.strategy))
			c := startChild(t, "--config", config, "--kubeconfig", kubeconfig(t, cfg), "--listen", "")
			waitLog(t, c, `"msg":"listed events"`, 1, time.Minute)
			if _, err := createEvents(t.Context(), client, ns, 0, 20, 4, 0); err != nil {
				t.Fatal(err)
			}
			waitLog(t, c, `"msg":"sink write failed; retrying"`, 1, time.Minute)
			err := c.stop(t, syscall.SIGTERM)
			code := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Errorf("exit status %d after SIGTERM with the %s webhook down, want %d", code, tc.strategy, tc.want)
			}
			if tc.want == 0 {
				waitLog(t, c, `"msg":"lossy sink dropped occurrences at the shutdown deadline"`, 1, time.Second)
			}
		})
	}
}
