//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter"
	"github.com/fanout-go/fanout/k8s/apiservertest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// child is the fanout-eventer command run by the test binary in a child
// process (see childEnv).
type child struct {
	cmd  *exec.Cmd
	done chan error
	log  string
}

func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	log := filepath.Join(t.TempDir(), "child.log")
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, "\n"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan error, 1), log: log}
	go func() { c.done <- cmd.Wait(); out.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("child output:\n%s", b)
		}
	})
	return c
}

// stop sends sig and waits for the exit, returning its error.
func (c *child) stop(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	_ = c.cmd.Process.Signal(sig)
	select {
	case err := <-c.done:
		c.done <- err // for the cleanup
		return err
	case <-time.After(time.Minute):
		t.Fatalf("child did not exit within a minute of %v", sig)
		return nil
	}
}

func TestKilledAndRestartedMidStreamLosesAndRepeatsNothing(t *testing.T) {
	cfg, client := cluster(t)
	ns := apiservertest.Namespace(t, client, "restart")
	dir := t.TempDir()
	natsURL := natsServer(t)
	hook := newWebhook(t, nil)
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`
namespace: %s
checkpoint: {file: %s, interval: 200ms}
route:
  match: [{receiver: file}, {receiver: hook}, {receiver: nats}]
receivers:
  - name: file
    file: {path: %s, maxBytes: 200000, maxbackups: 100}
  - name: hook
    webhook: {endpoint: %s}
    queue: {strategy: Wait}
  - name: nats
    nats: {url: %q, subject: events.k8s}
`, ns, filepath.Join(dir, "ck.json"), filepath.Join(dir, "events.jsonl"), hook.URL, natsURL)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", config, "--kubeconfig", kubeconfig(t, cfg), "--listen", ""}
	const total = 3000
	first := startChild(t, args...)
	halfway := hook.set.reach(800)
	created := make(chan error, 1)
	var want map[string]bool
	go func() {
		var err error
		want, err = createEvents(context.Background(), client, ns, 0, total, 4, 0)
		created <- err
	}()
	<-halfway
	if err := first.stop(t, syscall.SIGKILL); err == nil {
		t.Fatal("the killed exporter exited cleanly")
	}
	raised := raiseWhileDown(t, client, ns, 100)
	second := startChild(t, args...)
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	for k := range raised {
		want[k] = true
	}
	hook.set.setWant(want)
	hook.set.wait(t, "webhook", 3*time.Minute)
	if err := second.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	fileKeys(t, filepath.Join(dir, "events.jsonl"), want).check(t, "file", false)
	streamKeys(t, natsURL, want).check(t, "nats", false)
	dups := hook.set.check(t, "webhook (deduplicated by Idempotency-Key)", true)
	t.Logf("%d occurrences; the webhook received %d of them twice (at least once after a kill; the Idempotency-Key tells)", len(want), dups)
}

// raiseWhileDown raises the count of the first n events to 2 and returns
// the keys of those occurrences.
func raiseWhileDown(t *testing.T, client kubernetes.Interface, ns string, n int) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for i := range n {
		e, err := client.CoreV1().Events(ns).Get(t.Context(), fmt.Sprintf("ev-%05d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.Count = 2
		if e, err = client.CoreV1().Events(ns).Update(t.Context(), e, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		keys[exporter.Key(string(e.UID), 2)] = true
	}
	return keys
}

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

// writeCheckpoint writes ck as the checkpoint file of resumeSetup's dir.
func writeCheckpoint(t *testing.T, dir string, ck exporter.Checkpoint) {
	t.Helper()
	b, err := json.Marshal(ck)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "ck.json"), b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
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

// waitReady waits until the exporter at addr (a child, or Run in-process
// with a Listener) answers /readyz: its source has handled its first list.
func waitReady(t *testing.T, addr string) {
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
	waitReady(t, addr)
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
	// The checkpoint of an exporter that forwarded count 1 of every event,
	// then stopped; while it is down, the counts rise to 4 and etcd
	// compacts its history past the checkpoint's resource version.
	ck, l := forwardedOnce(t, client, ns, n)
	raiseTo(t, client, ns, n, 4, map[string]bool{})
	compact(t, client, ns)
	want := map[string]bool{}
	for _, e := range l.Items {
		want[exporter.Key(string(e.UID), 4)] = true
	}
	writeCheckpoint(t, dir, ck)
	hook.set.setWant(want)
	child := startChild(t, args...)
	hook.set.wait(t, "webhook", time.Minute)
	waitReady(t, addr)
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

// A checkpoint from a resource version the API server has not reached, as
// after its etcd is restored from a backup: kube-apiserver starts a watch
// from it and sends nothing, new changes included, until its revisions pass
// it. The exporter asks first, and once the answer has been "Too large
// resource version" for 30 s, lists, and exports what changed.
func TestCheckpointAheadOfTheAPIServerMakesAListAfterThirtySeconds(t *testing.T) {
	client, ns, dir, hook, addr, args := resumeSetup(t, "ahead")
	const n = 20
	ck, _ := forwardedOnce(t, client, ns, n)
	rv, err := strconv.ParseUint(ck.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	ck.ResourceVersion = strconv.FormatUint(rv+1_000_000, 10)
	want := map[string]bool{}
	raiseTo(t, client, ns, n, 2, want)
	writeCheckpoint(t, dir, ck)
	hook.set.setWant(want)
	start := time.Now()
	child := startChild(t, args...)
	hook.set.wait(t, "webhook", 2*time.Minute)
	if d := time.Since(start); d < 30*time.Second {
		t.Errorf("exported after %v: want a list only after 30 s of too large answers", d)
	}
	waitReady(t, addr)
	if v := childMetric(t, addr, "fanout_eventer_source_relists_total"); v != 1 {
		t.Errorf("%v relists, want 1", v)
	}
	if err := child.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	hook.set.check(t, "webhook", false)
	log, _ := os.ReadFile(child.log)
	if !strings.Contains(string(log), "has not reached the last resource version") {
		t.Errorf("the log does not say why it listed:\n%s", log)
	}
}

// forwardedOnce creates events [0, n) in ns and returns them as listed, and
// the checkpoint of an exporter that forwarded count 1 of each, at the
// list's resource version.
func forwardedOnce(t *testing.T, client kubernetes.Interface, ns string, n int) (exporter.Checkpoint, *corev1.EventList) {
	t.Helper()
	if _, err := createEvents(t.Context(), client, ns, 0, n, 4, 0); err != nil {
		t.Fatal(err)
	}
	l, err := client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ck := exporter.Checkpoint{Version: 1, ResourceVersion: l.ResourceVersion, Counts: map[string]int32{}}
	for _, e := range l.Items {
		ck.Counts[string(e.UID)] = 1
	}
	return ck, l
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
# No checkpoint: without this, events made before a slow start's first
# list would be cut off by kubernetes-event-exporter's 5 s default.
maxEventAgeSeconds: 3600
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
