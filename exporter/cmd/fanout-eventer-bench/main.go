// Command fanout-eventer-bench measures the exporter's pipeline with a
// synthetic source (no API server): occurrences per second through routing
// to a file sink (the default record: kubernetes-event-exporter's Event
// JSON) and a no-op webhook (a layout, as their users write one), and the
// resident memory during a burst while one sink is stalled.
//
//	go run ./cmd/fanout-eventer-bench                 # 1,000,000 events each
//	go run ./cmd/fanout-eventer-bench -n 200000 -burst 200000
//	go run ./cmd/fanout-eventer-bench -lag 15000    # make bench-e2e
//
// With -lag it measures instead what users see end to end: the time from
// an event's create on a real kube-apiserver (started here, as the e2e
// tests do) to its record's arrival at a local webhook that takes 5 ms a
// request, with the webhook's writers at 1 and at the default, 8.
//
// The synthetic source keeps 20,000 events live (it deletes the oldest, as
// the API server's one-hour retention does), so the checkpoint state stays
// at a cluster's size.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/exporter"
)

func main() {
	n := flag.Int("n", 1_000_000, "occurrences in the throughput run")
	burst := flag.Int("burst", 1_000_000, "occurrences in the burst with a stalled sink")
	lag := flag.Int("lag", 0, "instead: the webhook lag of this many events created through a real kube-apiserver (make bench-e2e: 15000)")
	creators := flag.Int("lag-creators", 8, "goroutines creating the events of -lag")
	service := flag.Duration("lag-service", 5*time.Millisecond, "what the local webhook takes per request in -lag")
	writers := flag.String("lag-writers", "1,8", "the webhook's writers to measure in -lag, comma-separated")
	flag.Parse()
	if *lag > 0 {
		o := lagOptions{n: *lag, creators: *creators, service: *service, wait: 2 * time.Minute}
		for _, f := range strings.Split(*writers, ",") {
			w, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || w < 1 {
				fmt.Fprintf(os.Stderr, "bad -lag-writers %q\n", *writers)
				os.Exit(2)
			}
			o.writers = append(o.writers, w)
		}
		if err := lagRun(os.Stdout, o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Stdout, *n, *burst); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// liveEvents is how many events the synthetic source keeps alive.
const liveEvents = 20_000

const config = `
route:
  drop:
    - namespace: "^kube-node-lease$"
  match:
    - receiver: file
    - receiver: hook
  routes:
    - match:
        - type: "^Warning$"
          minCount: 1000000
          receiver: hook
receivers:
  - name: file
    file: {path: %s, maxsize: 256, maxbackups: 1}
    queue: {length: %d, strategy: Wait}
    batch: 1024
  - name: hook
    webhook:
      endpoint: %s
      timeout: %s
      layout:
        message: "{{ .Message }}"
        reason: "{{ .Reason }}"
        kind: "{{ .InvolvedObject.Kind }}"
        object: "{{ .InvolvedObject.Namespace }}/{{ .InvolvedObject.Name }}"
        count: "{{ .Count }}"
    queue: {length: %d, strategy: %s}
    batch: %d
`

func run(w io.Writer, n, burst int) error {
	fmt.Fprintf(w, "fanout-eventer pipeline, synthetic source, GOMAXPROCS=%d, %s\n", runtime.GOMAXPROCS(0), runtime.Version())
	if burst > 0 {
		r, err := stalledBurst(burst)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "burst: %d occurrences, webhook stalled (DropOldest, queue %d), file sink (Wait, queue %d): %.0f occurrences/s to the file\n",
			burst, r.hookQueue, r.fileQueue, r.rate)
		fmt.Fprintf(w, "  resident memory: peak %.1f MiB (before the burst %.1f MiB); Go heap in use at the peak sample %.1f MiB\n",
			mib(r.peakRSS), mib(r.baseRSS), mib(r.heapAtPeak))
		fmt.Fprintf(w, "  stalled webhook: %d dropped as queue_oldest, %d still queued or in flight when abandoned\n",
			r.droppedOldest, r.abandoned)
	}
	if n > 0 {
		rate, err := throughput(n)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "throughput: %d occurrences through routing to a file sink and a no-op webhook: %.0f occurrences/s (target >= 100000: %s)\n",
			n, rate, pass(rate >= 100_000))
	}
	return nil
}

func pass(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

var (
	namespaces = []string{"default", "kube-system", "shop", "payments", "search", "monitoring", "ingress", "batch"}
	reasons    = []string{"Scheduled", "Pulled", "Created", "Started", "BackOff", "Unhealthy", "FailedMount", "Killing"}
)

// source feeds p with n occurrences of distinct events (every fourth a
// Warning), deleting the event liveEvents before each new one.
func source(ctx context.Context, p *exporter.Pipeline, n int) error {
	now := time.Now()
	for i := range n {
		uid := "uid-" + strconv.Itoa(i)
		o := &exporter.Occurrence{UID: uid, Count: 1, APIVersion: exporter.CoreV1,
			Namespace: namespaces[i%len(namespaces)], Name: "pod-" + strconv.Itoa(i%5000) + ".18f2a",
			ResourceVersion: strconv.Itoa(i + 1), Type: "Normal", Reason: reasons[i%len(reasons)],
			Message:             "Container image \"registry.local/app:v1.2.3\" already present on machine",
			ReportingController: "kubelet", ReportingInstance: "node-" + strconv.Itoa(i%50),
			Regarding: exporter.ObjectRef{Kind: "Pod", Namespace: namespaces[i%len(namespaces)],
				Name: "pod-" + strconv.Itoa(i%5000), APIVersion: "v1"},
			FirstTime: now, LastTime: now}
		if i%4 == 0 {
			o.Type = "Warning"
		}
		if err := p.Occurred(ctx, o); err != nil {
			return err
		}
		if i >= liveEvents {
			p.Deleted("uid-"+strconv.Itoa(i-liveEvents), "")
		}
	}
	return nil
}

func throughput(n int) (float64, error) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	dir, err := os.MkdirTemp("", "fanout-eventer-bench")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	cfg, err := exporter.ParseConfig("bench", []byte(fmt.Sprintf(config, filepath.Join(dir, "events.jsonl"), 10000,
		hook.URL, "10s", 10000, "Wait", 1000)))
	if err != nil {
		return 0, err
	}
	p, err := exporter.NewPipeline(cfg, exporter.PipelineOptions{})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := source(context.Background(), p, n); err != nil {
		return 0, err
	}
	if err := p.Shutdown(context.Background()); err != nil {
		return 0, err
	}
	for _, s := range p.Stats() {
		if s.Sent != uint64(n) {
			return 0, fmt.Errorf("sink %s stored %d of %d", s.Name, s.Sent, n)
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

type burstResult struct {
	rate                         float64
	fileQueue, hookQueue         int
	baseRSS, peakRSS, heapAtPeak uint64
	droppedOldest, abandoned     uint64
}

func stalledBurst(n int) (burstResult, error) {
	r := burstResult{fileQueue: 10000, hookQueue: 10000}
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer hook.Close()
	defer close(release)
	dir, err := os.MkdirTemp("", "fanout-eventer-bench")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	cfg, err := exporter.ParseConfig("bench", []byte(fmt.Sprintf(config, filepath.Join(dir, "events.jsonl"), r.fileQueue,
		hook.URL, "10m", r.hookQueue, "DropOldest", 100)))
	if err != nil {
		return r, err
	}
	runtime.GC()
	r.baseRSS = rss()
	p, err := exporter.NewPipeline(cfg, exporter.PipelineOptions{})
	if err != nil {
		return r, err
	}
	stop := sampleRSS(&r)
	start := time.Now()
	err = source(context.Background(), p, n)
	r.rate = float64(n) / time.Since(start).Seconds()
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.Shutdown(ctx) // the stalled webhook misses the deadline
	hs := p.Stats()[1]
	r.droppedOldest = hs.Dropped[fanout.DropOldest]
	r.abandoned = hs.Dropped[fanout.DropShutdown]
	return r, err
}

// sampleRSS records the peak resident set size every 20 ms until stop.
func sampleRSS(r *burstResult) (stop func()) {
	var done atomic.Bool
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var ms runtime.MemStats
		for !done.Load() {
			if v := rss(); v > r.peakRSS {
				r.peakRSS = v
				runtime.ReadMemStats(&ms)
				r.heapAtPeak = ms.HeapInuse
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() { done.Store(true); <-finished }
}

// rss returns the resident set size from /proc/self/status (0 elsewhere).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
