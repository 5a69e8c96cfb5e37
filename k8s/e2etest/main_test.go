//go:build e2e

package e2etest

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/fanout-go/fanout/k8s/apiservertest"
	fanoutrecord "github.com/fanout-go/fanout/k8s/record"
)

func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard()) // the outage test provokes many logged errors
	os.Exit(apiservertest.RunTests(m))
}

// cluster returns the shared env and a clientset, starting the env on
// first use. It fails the test if the env cannot start: the binaries are
// built when missing, never skipped. tune, if given, adjusts the client's
// configuration.
func cluster(t *testing.T, tune ...func(*rest.Config)) (*apiservertest.Env, kubernetes.Interface) {
	t.Helper()
	env := apiservertest.Shared(t)
	cfg := env.Config()
	for _, f := range tune {
		f(cfg)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(httpClient.CloseIdleConnections)
	return env, client
}

// countWatch reads w until it has seen n added or modified events, or fails
// the test after 30 s, and returns how many of each it saw.
func countWatch(t *testing.T, w watch.Interface, n int) (added, modified int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for added+modified < n {
		select {
		case ev := <-w.ResultChan():
			switch ev.Type {
			case watch.Added:
				added++
			case watch.Modified:
				modified++
			}
		case <-deadline:
			t.Fatalf("watch saw %d added and %d modified of %d", added, modified, n)
		}
	}
	return added, modified
}

// burstEvents is the size of the burst tests.
const burstEvents = 10_000

// burst calls record(i) for i in [0, burstEvents) on this goroutine and
// checks that neither goroutines (at most 4 more, and 3 per writer of the
// sink: the writer and the two of its HTTP connection; sampled every 250
// calls) nor the heap (less than 64 MiB more) grow with the events.
func burst(t *testing.T, record func(i int)) {
	t.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	base := runtime.NumGoroutine()
	peak := base
	for i := range burstEvents {
		record(i)
		if i%250 == 0 {
			peak = max(peak, runtime.NumGoroutine())
		}
	}
	peak = max(peak, runtime.NumGoroutine())
	runtime.ReadMemStats(&after)
	assert.LessOrEqual(t, peak-base, 4+3*fanoutrecord.DefaultWriters,
		"goroutines grow with sinks and their writers, not events (client-go v0.37's tools/events starts two per event)")
	assert.Less(t, int64(after.HeapInuse)-int64(before.HeapInuse), int64(64<<20), "heap bounded by the 1000-event queue")
}
