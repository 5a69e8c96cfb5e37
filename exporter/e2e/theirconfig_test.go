//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout/k8s/apiservertest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// theirConfig is a kubernetes-event-exporter configuration as a deployment
// of it has it (testdata of the exporter module): leader election, ${ENV}
// tokens, /dev/stdout written by a pipe receiver with a layout and by a
// file receiver (the Event JSON), a webhook with TLS options and templated
// headers, an Elasticsearch receiver.
const theirConfig = "../testdata/kubernetes-event-exporter/migrated.yaml"

// pipedChild is a child whose standard output is a pipe, as a container
// runtime connects it, read line by line.
type pipedChild struct {
	*child
	mu    sync.Mutex
	lines []string
}

// startPipedChild starts the fanout-eventer command with env added to the
// test's environment, its standard output a pipe and its log (standard
// error) in a file.
func startPipedChild(t *testing.T, env []string, args ...string) *pipedChild {
	t.Helper()
	log := filepath.Join(t.TempDir(), "child.log")
	logFile, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), childEnv+"="+strings.Join(args, "\n"))
	cmd.Stdout, cmd.Stderr = w, logFile
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		logFile.Close()
		t.Fatal(err)
	}
	w.Close() // the child holds the writing end
	pc := &pipedChild{child: &child{cmd: cmd, done: make(chan error, 1), log: log}}
	read := make(chan struct{})
	go func() {
		defer close(read)
		pc.readLines(r)
	}()
	go func() { pc.done <- cmd.Wait(); logFile.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-pc.done
		<-read
		r.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("child log:\n%s", b)
		}
	})
	return pc
}

func (pc *pipedChild) readLines(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		pc.mu.Lock()
		pc.lines = append(pc.lines, sc.Text())
		pc.mu.Unlock()
	}
}

// stdoutLines returns the lines written to the child's standard output so far.
func (pc *pipedChild) stdoutLines() []string {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return append([]string(nil), pc.lines...)
}

// alertHook records the requests of the migrated configuration's webhook.
type alertHook struct {
	*httptest.Server
	mu      sync.Mutex
	reasons map[string]int // X-Event-Reason header -> requests
	auth    []string
	names   map[string]bool // involvedObject.name of the records
}

func newAlertHook(t *testing.T) *alertHook {
	h := &alertHook{reasons: map[string]int{}, names: map[string]bool{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var rec struct {
			InvolvedObject struct{ Name string } `json:"involvedObject"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &rec); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.reasons[r.Header.Get("X-Event-Reason")]++
		h.auth = append(h.auth, r.Header.Get("Authorization"))
		h.names[rec.InvolvedObject.Name] = true
	}))
	t.Cleanup(h.Close)
	return h
}

// stdoutRecords returns, by object name, the records on standard output
// about objects whose name starts with prefix: the layout's (a name field)
// and the Event JSON's (involvedObject.name), with the count of the
// latter.
func stdoutRecords(t *testing.T, lines []string, prefix string) (layout map[string]map[string]any, counts map[string][]float64) {
	t.Helper()
	layout, counts = map[string]map[string]any{}, map[string][]float64{}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("a line on standard output is not JSON: %q: %v", l, err)
		}
		if name, _ := rec["name"].(string); strings.HasPrefix(name, prefix) {
			layout[name] = rec
		}
		obj, _ := rec["involvedObject"].(map[string]any)
		if name, _ := obj["name"].(string); strings.HasPrefix(name, prefix) {
			count, _ := rec["count"].(float64)
			counts[name] = append(counts[name], count)
		}
	}
	return layout, counts
}

func TestTheirConfigurationRunsAsIsAgainstTheAPIServer(t *testing.T) {
	cfg, client := cluster(t)
	ns := apiservertest.Namespace(t, client, "theirs")
	hook := newAlertHook(t)
	c := startPipedChild(t, []string{"CLUSTER_NAME=prod-eu", "ALERTS_URL=" + hook.URL, "ALERTS_TOKEN=s3cret",
		"POD_NAMESPACE=" + ns}, "--config", theirConfig, "--kubeconfig", kubeconfig(t, cfg), "--listen", "",
		"--leader-elect-identity", "theirs-e2e")
	waitLog(t, c.child, "listed events", 1, time.Minute)
	waitLog(t, c.child, `"maxEventAge":"1m0s"`, 1, time.Second) // their maxEventAgeSeconds: 60 takes effect
	for _, l := range logLines(t, c.child) {
		if strings.Contains(l, "ignored") && (strings.Contains(l, "maxEventAgeSeconds") || strings.Contains(l, "metricsNamePrefix")) {
			t.Errorf("a key of theirs reported ignored: %s", l)
		}
	}
	prefix := "theirs-" + ns + "-"
	const n = 5
	createTheirEvents(t, client, ns, prefix, n)

	recs, counts := waitStdoutRecords(t, c, prefix, n)
	for name, rec := range recs {
		if rec["cluster"] != "prod-eu" || rec["kind"] != "Pod" || rec["reason"] != "BackOff" ||
			!strings.HasPrefix(fmt.Sprint(rec["message"]), "back-off restarting") || rec["createdAt"] == "" {
			t.Errorf("%s: record %v, want the layout's fields with ${CLUSTER_NAME} expanded", name, rec)
		}
		if got := fmt.Sprint(counts[name]); got != "[1 2]" {
			t.Errorf("%s: Event JSON records of counts %s on /dev/stdout, want one per count raise: [1 2]", name, got)
		}
	}
	waitAlerts(t, hook, prefix, n)
	lease, err := client.CoordinationV1().Leases(ns).Get(t.Context(), "kubernetes-event-exporter", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Lease of leaderElection.leaderElectionID: %v", err)
	}
	if id := lease.Spec.HolderIdentity; id == nil || *id != "theirs-e2e" {
		t.Errorf("Lease holder %v, want theirs-e2e", id)
	}
	for _, l := range logLines(t, c.child) {
		if strings.Contains(l, `"level":"ERROR"`) && !strings.Contains(l, "elasticsearch") {
			t.Errorf("an error logged, other than the unreachable Elasticsearch host's: %s", l)
		}
	}
}

// createTheirEvents creates n Warning events about pods named prefix+i, then
// raises each one's count to 2 (what the configuration's alerts receiver
// matches: minCount 2).
func createTheirEvents(t *testing.T, client kubernetes.Interface, ns, prefix string, n int) {
	t.Helper()
	for i := range n {
		e := event(ns, i, fmt.Sprintf("back-off restarting failed container %d", i))
		e.InvolvedObject.Name = fmt.Sprintf("%s%d", prefix, i)
		e, err := client.CoreV1().Events(ns).Create(t.Context(), e, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.Count, e.LastTimestamp = 2, metav1.Now()
		if _, err := client.CoreV1().Events(ns).Update(t.Context(), e, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitStdoutRecords waits until standard output holds a layout record of
// each of the n objects and the Event JSON of both their occurrences, and
// returns them by object name.
func waitStdoutRecords(t *testing.T, c *pipedChild, prefix string, n int) (map[string]map[string]any, map[string][]float64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		recs, counts := stdoutRecords(t, c.stdoutLines(), prefix)
		occurrences := 0
		for _, cs := range counts {
			occurrences += len(cs)
		}
		if len(recs) == n && occurrences >= 2*n { // more is reported by the caller's check of counts
			return recs, counts
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute, standard output has layout records of %d of %d objects and %d of %d Event JSON records",
				len(recs), n, occurrences, 2*n)
		}
	}
}

// waitAlerts waits until the webhook received a record of each of the n
// objects, with the headers of the configuration: the token expanded from
// the environment and the reason from a template.
func waitAlerts(t *testing.T, hook *alertHook, prefix string, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		hook.mu.Lock()
		got := 0
		for name := range hook.names {
			if strings.HasPrefix(name, prefix) {
				got++
			}
		}
		backoffs, auth := hook.reasons["BackOff"], append([]string(nil), hook.auth...)
		hook.mu.Unlock()
		if got == n {
			for _, a := range auth {
				if a != "Bearer s3cret" {
					t.Errorf("Authorization %q, want the token expanded from ${ALERTS_TOKEN}", a)
				}
			}
			if backoffs < n {
				t.Errorf("%d requests with X-Event-Reason: BackOff, want at least %d", backoffs, n)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d objects' count raises reached the webhook after a minute", got, n)
		}
	}
}
