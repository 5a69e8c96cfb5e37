package exporter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

func TestMainRejectsBadConfigurationBeforeStartingWithTheLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("receivers:\n  - name: a\n    webhook: {endpoint: \"not a url\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"--config", path, "--kubeconfig", "/nonexistent"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), `line 2: receiver "a": webhook.endpoint "not a url"`) {
		t.Errorf("exit %d, stderr %q; want 2 and the line of the problem", code, stderr.String())
	}
}

func TestMainChecksTheExampleConfiguration(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"--config", "example.yaml", "--check-config"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "example.yaml: valid, 4 receivers") {
		t.Errorf("stdout %q", stdout.String())
	}
}

func TestMainRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--config", "example.yaml", "extra"},
		{"--config", "example.yaml", "--events-api", "v2", "--check-config"},
		{"--config", "example.yaml", "--leader-elect", "--leader-elect-namespace", ""},
		{"--no-such-flag"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), args, &stdout, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, stderr.String())
		}
	}
}

func TestMainFailsCleanlyWithoutACluster(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"--config", "example.yaml", "--kubeconfig", filepath.Join(t.TempDir(), "none"), "--listen", ""}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "exiting") {
		t.Errorf("exit %d, stderr %q; want 1 and the error logged", code, stderr.String())
	}
}

func TestMainChecksTheirConfigurationPrintingEachWarningWithItsLine(t *testing.T) {
	var stdout, stderr bytes.Buffer
	path := "testdata/kubernetes-event-exporter/13-stdout.yaml"
	if code := Main(context.Background(), []string{"--config", path, "--check-config"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "valid, 1 receivers, 1 warnings") ||
		!strings.Contains(stderr.String(), path+`: warning: line 12: deDot: "true|false" is not a boolean`) ||
		!strings.Contains(stdout.String(), path+": start: no checkpoint: at every start, events last seen more than 5s "+
			"before the start are not exported (maxEventAgeSeconds)") {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// --check-config says which record stream applies, and what a start
// exports first: their stream with the receivers that keep ours named,
// and their age cut-off without a checkpoint; ours by default.
func TestCheckConfigSaysWhichRecordStreamAndWhatAStartExportsFirst(t *testing.T) {
	for doc, want := range map[string][]string{
		"compat: kubernetes-event-exporter\nroute: {match: [{receiver: es}, {receiver: archive}]}\nreceivers:\n" +
			"  - name: es\n    elasticsearch: {hosts: [\"http://es:9200\"], index: kube-events}\n" +
			"  - name: archive\n    compat: fanout\n    file: {path: /tmp/events.jsonl}\n": {
			": records: kubernetes-event-exporter's (compat: kubernetes-event-exporter): its records, one per event at first sighting",
			"fanout-eventer's for receivers archive (their own compat)",
			": start: no checkpoint: at every start, events last seen more than 5s before the start are not exported " +
				"(kubernetes-event-exporter's default maxEventAgeSeconds"},
		"checkpoint: {file: /tmp/ck.json}\nroute: {match: [{receiver: out}]}\nreceivers:\n  - name: out\n    stdout: {}\n": {
			": records: fanout-eventer's (compat: fanout, the default): a record per count raise, with the fanout object",
			": start: a start resumes from the checkpoint file /tmp/ck.json, which decides what is exported; the first start " +
				"(no checkpoint yet; after one stopped during its list, for the events it did not count): every event the " +
				"API server still holds is exported"},
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), []string{"--config", path, "--check-config"}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		for _, w := range want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("stdout %q\nwant %q", stdout.String(), w)
			}
		}
	}
}

func TestKlogLinesComeOutAsJSONThroughTheExporterLogger(t *testing.T) {
	var buf bytes.Buffer
	routeKlog(newLogger(&Config{LogFormat: "json", LogLevel: "info"}, &buf))
	t.Cleanup(klog.ClearLogger)
	klog.ErrorS(errors.New("connection refused"), "Failed to update lock", "lease", "ns/x")
	klog.Info("plain klog line")
	klog.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("not a JSON line: %q", line)
			continue
		}
		if rec["logger"] != "client-go" {
			t.Errorf("line %q: want logger client-go", line)
		}
	}
	if !strings.Contains(lines[0], `"msg":"Failed to update lock"`) || !strings.Contains(lines[0], `connection refused`) {
		t.Errorf("klog error line lost its message or error: %s", lines[0])
	}
}

// --check-config validates the configuration, not where it runs: their
// configuration with leaderElection.enabled, checked outside a pod (no
// service account namespace, no $POD_NAMESPACE), is valid, with a warning
// that the Lease's namespace must be known when it runs. Before, it was
// reported as invalid (exit 2).
func TestCheckConfigOfLeaderElectionOutsideAPodIsValidWithAWarning(t *testing.T) {
	old := serviceAccountNamespace
	serviceAccountNamespace = filepath.Join(t.TempDir(), "none")
	t.Cleanup(func() { serviceAccountNamespace = old })
	t.Setenv("POD_NAMESPACE", "")
	path := filepath.Join(t.TempDir(), "their.yaml")
	their := "leaderElection:\n  enabled: true\n  leaderElectionID: kubernetes-event-exporter\n" +
		"route:\n  routes:\n    - match:\n        - receiver: dump\nreceivers:\n  - name: dump\n    stdout: {}\n"
	if err := os.WriteFile(path, []byte(their), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"--config", path, "--check-config"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), path+": valid") ||
		!strings.Contains(stderr.String(), "warning: leaderElection.enabled needs the pod's namespace") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, valid, and a warning about the Lease's namespace",
			code, stdout.String(), stderr.String())
	}
	// Running still needs it: nothing starts without the Lease's namespace.
	stderr.Reset()
	code = Main(context.Background(), []string{"--config", path, "--kubeconfig", "/nonexistent", "--listen", ""}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "leaderElection.enabled needs the pod's namespace") {
		t.Errorf("run: exit %d, stderr %q; want 2 and the missing namespace", code, stderr.String())
	}
}

func TestCheckConfigFindsMissingTLSFilesWithTheirLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tls.yaml")
	if err := os.WriteFile(path, []byte(`route: {match: [{receiver: hook}]}
receivers:
  - name: hook
    webhook:
      endpoint: https://hook.example
      tls: {caFile: /nonexistent/ca.crt}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"--config", path, "--check-config"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), `line 3: receiver "hook": webhook.tls.caFile: open /nonexistent/ca.crt`) {
		t.Errorf("exit %d, stderr %q; want 2 and the missing file with its receiver's line", code, stderr.String())
	}
}

func TestTheirFlagNamesConfAndMetricsAddressAreAccepted(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"-conf=example.yaml", "-metrics-address=:2112", "--check-config"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "example.yaml: valid") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

func TestLeaderElectNameWinsOverTheirLeaderElectionIDWithAWarning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "le.yaml")
	if err := os.WriteFile(path, []byte("leaderElection: {enabled: true, leaderElectionID: kubernetes-event-exporter}\n"+
		"route: {match: [{receiver: out}]}\nreceivers: [{name: out, stdout: {}}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"--config", path, "--check-config", "--leader-elect-namespace", "ops",
		"--leader-elect-name", "fanout-eventer"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stderr.String(), "leaderElection.leaderElectionID kubernetes-event-exporter: "+
		"the Lease is fanout-eventer (--leader-elect-name wins)") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
