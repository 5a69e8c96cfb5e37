package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fanout-go/fanout/exporter"
	"github.com/fanout-go/fanout/k8s/apiservertest"
)

// lagOptions configure the lag measurement: n events created through a
// real kube-apiserver by creators goroutines, exported to a local webhook
// that takes service per request, with each of writers.
type lagOptions struct {
	n, creators int
	service     time.Duration
	writers     []int
	wait        time.Duration
}

// lagResult is the lag of one run: from an event's create returning to its
// record arriving at the webhook.
type lagResult struct {
	writers       int
	p50, p99, max time.Duration
	lost          int           // records not at the webhook o.wait after the creates (queued, not dropped: the checkpoint keeps them)
	created       time.Duration // the time the creates took
}

// lagRun measures the lag with each of o.writers on one API server.
func lagRun(w io.Writer, o lagOptions) error {
	env, err := apiservertest.New(context.Background())
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	cfg := env.Config()
	cfg.QPS, cfg.Burst = 1e6, 1e6
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "lag: %d events created through a real kube-apiserver by %d goroutines, exported to a local webhook taking %v a request\n",
		o.n, o.creators, o.service)
	fmt.Fprintf(w, "| webhook writers | creates took | lag p50 | lag p99 | lag max | not there %v after the creates |\n", o.wait)
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|")
	var def lagResult
	for i, writers := range o.writers {
		r, err := lagOnce(client, o, writers, fmt.Sprint("lag-", i))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "| %d | %.1f s | %s | %s | %s | %d |\n", r.writers, r.created.Seconds(), lagMS(r.p50), lagMS(r.p99), lagMS(r.max), r.lost)
		if writers == exporter.DefaultWriters {
			def = r
		}
	}
	if def.writers == 0 {
		return nil
	}
	fmt.Fprintf(w, "%s  webhook lag p50 ≤ 50 ms (default writers): %s\n", pass(def.p50 <= 50*time.Millisecond), lagMS(def.p50))
	fmt.Fprintf(w, "%s  webhook lag p99 ≤ 500 ms (default writers): %s\n", pass(def.p99 <= 500*time.Millisecond), lagMS(def.p99))
	fmt.Fprintf(w, "%s  every record there (default writers): %d missing\n", pass(def.lost == 0), def.lost)
	return nil
}

func lagMS(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }

// arrivals records when each event's record reached the webhook.
type arrivals struct {
	mu sync.Mutex
	at map[string]time.Time // by event name
}

func (a *arrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var rec struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	b, _ := io.ReadAll(r.Body)
	now := time.Now()
	if err := json.Unmarshal(b, &rec); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	if _, seen := a.at[rec.Metadata.Name]; !seen {
		a.at[rec.Metadata.Name] = now
	}
	a.mu.Unlock()
}

// lagOnce runs the exporter with a webhook of writers writers over namespace
// ns, creates o.n events and measures their lag.
func lagOnce(client kubernetes.Interface, o lagOptions, writers int, ns string) (lagResult, error) {
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return lagResult{}, err
	}
	got := &arrivals{at: map[string]time.Time{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(o.service) // what the service behind the webhook takes
		got.ServeHTTP(w, r)
	}))
	defer srv.Close()
	stop, err := startExporter(client, ns, srv.URL, writers)
	if err != nil {
		return lagResult{}, err
	}
	created, took, err := createEvents(ctx, client, ns, o.n, o.creators)
	if err != nil {
		_ = stop()
		return lagResult{}, err
	}
	for deadline := time.Now().Add(o.wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got.mu.Lock()
		n := len(got.at)
		got.mu.Unlock()
		if n >= len(created) {
			break
		}
	}
	if err := stop(); err != nil {
		return lagResult{}, err
	}
	return lags(created, got, writers, took), nil
}

// lags computes the percentiles of arrival minus creation.
func lags(created map[string]time.Time, got *arrivals, writers int, took time.Duration) lagResult {
	got.mu.Lock()
	defer got.mu.Unlock()
	var ds []time.Duration
	r := lagResult{writers: writers, created: took}
	for name, c := range created {
		a, ok := got.at[name]
		if !ok {
			r.lost++
			continue
		}
		ds = append(ds, max(a.Sub(c), 0))
	}
	if len(ds) == 0 {
		return r
	}
	slices.Sort(ds)
	r.p50, r.p99, r.max = ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1]
	return r
}

// startExporter runs the exporter in-process on ns with one webhook
// receiver of writers writers (defaults otherwise) and waits until it is
// ready.
func startExporter(client kubernetes.Interface, ns, url string, writers int) (stop func() error, err error) {
	dir, err := os.MkdirTemp("", "fanout-eventer-lag-")
	if err != nil {
		return nil, err
	}
	cfg, err := exporter.ParseConfig("lag.yaml", fmt.Appendf(nil, `
namespace: %s
omitLookup: true
checkpoint: {file: %s}
route: {match: [{receiver: hook}]}
receivers:
  - name: hook
    webhook: {endpoint: %s}
    writers: %d
`, ns, filepath.Join(dir, "ck.json"), url, writers))
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- exporter.Run(ctx, exporter.Options{Config: cfg, Client: client, Listener: l}) }()
	stop = func() error {
		cancel()
		err := <-errc
		_ = os.RemoveAll(dir)
		return err
	}
	return stop, waitReady("http://" + l.Addr().String() + "/readyz")
}

func waitReady(url string) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("the exporter was not ready within a minute (%s)", url)
}

// createEvents creates n events in ns from creators goroutines and returns
// when each create returned, by event name, and how long they took.
func createEvents(ctx context.Context, client kubernetes.Interface, ns string, n, creators int) (map[string]time.Time, time.Duration, error) {
	var mu sync.Mutex
	created := make(map[string]time.Time, n)
	start := time.Now()
	var g errgroup.Group
	for c := range creators {
		g.Go(func() error {
			for i := c; i < n; i += creators {
				name := fmt.Sprintf("ev-%05d", i)
				now := metav1.Now()
				_, err := client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprint("p", i%200)},
					Reason:         "Lag", Message: "measuring", Type: corev1.EventTypeNormal, Count: 1,
					FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "lag"},
				}, metav1.CreateOptions{})
				if err != nil {
					return err
				}
				mu.Lock()
				created[name] = time.Now()
				mu.Unlock()
			}
			return nil
		})
	}
	err := g.Wait()
	return created, time.Since(start), err
}
