//go:build e2e

package e2etest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/fanout-go/fanout/k8s/apiservertest"
)

// One kube-apiserver and etcd for the package, started by the first test
// that needs them and stopped after the last.
var (
	envOnce sync.Once
	env     *apiservertest.Env
	envErr  error
)

func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard()) // the outage test provokes many logged errors
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the e2e env:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// cluster returns the shared env and a clientset, starting the env on
// first use. It fails the test if the env cannot start: the binaries are
// built when missing, never skipped. tune, if given, adjusts the client's
// configuration.
func cluster(t *testing.T, tune ...func(*rest.Config)) (*apiservertest.Env, kubernetes.Interface) {
	t.Helper()
	envOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		env, envErr = apiservertest.New(ctx)
	})
	if envErr != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v", envErr)
	}
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

// namespace creates a namespace for one test.
func namespace(t *testing.T, client kubernetes.Interface, name string) string {
	t.Helper()
	_, err := client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
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
// checks that neither goroutines (at most 4 more, sampled every 250 calls)
// nor the heap (less than 64 MiB more) grow with the events.
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
	assert.LessOrEqual(t, peak-base, 4, "goroutines grow with sinks, not events (client-go's tools/events starts two per event)")
	assert.Less(t, int64(after.HeapInuse)-int64(before.HeapInuse), int64(64<<20), "heap bounded by the 1000-event queue")
}
