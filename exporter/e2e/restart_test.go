//go:build e2e

package e2e

import (
	"github.com/fanout-go/fanout/k8s/apiservertest"

	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter"
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
