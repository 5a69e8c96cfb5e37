// Command fanout-e2e-bench measures the last mile: how long a burst of
// Kubernetes events takes to be on a real kube-apiserver (and etcd, started
// here from the binaries k8s/apiservertest builds and caches), fanout's
// k8s/record and k8s/events (with 1 writer and their default) against
// client-go's tools/record and tools/events. Each system records a burst of
// -events events about -objects pods (each pod's events of distinct
// reasons, so that every event is one create on either API and no spam
// bucket runs dry), then the clock runs until the API server holds every
// event, or -wait passes (the rest is lost).
//
//	go run ./cmd/fanout-e2e-bench             # make bench-e2e
//	go run ./cmd/fanout-e2e-bench -events 2000 -queue 2000
//
// Reported per system: the time from the first record call until the last
// event is on the server, the time after the last record call, the writes
// per second, and how many events were lost; the median of -reps bursts.
// Targets (issue 36): fanout's default on the server within 2 s of the
// last record call, at least 4× the writes per second of one writer, none
// lost; ahead of client-go on wall time and losses.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fanout-go/fanout/k8s/apiservertest"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fanout-e2e-bench:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	events, objects, reps, queue int
	wait                         time.Duration
	writers                      []int
	jsonFile                     string
}

func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("fanout-e2e-bench", flag.ContinueOnError)
	var o options
	fs.IntVar(&o.events, "events", 1000, "events in a burst, per API")
	fs.IntVar(&o.objects, "objects", 100, "pods the burst's events are about")
	fs.IntVar(&o.reps, "reps", 3, "bursts per system (the median is reported)")
	fs.IntVar(&o.queue, "queue", 1000, "fanout's queue length (WithQueueLength); client-go's is 1000")
	fs.DurationVar(&o.wait, "wait", time.Minute, "how long to wait for a burst to be on the server before counting the rest lost")
	fs.StringVar(&o.jsonFile, "json", "", "write the results as JSON Lines to `FILE`")
	list := fs.String("writers", "1,8,16,32", "fanout writer counts to measure, comma-separated")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.writers, err = parseInts(*list); err != nil {
		return o, err
	}
	if o.events < 1 || o.objects < 1 || o.reps < 1 || o.events%o.objects != 0 {
		return o, fmt.Errorf("-events (%d) must be a positive multiple of -objects (%d), -reps positive", o.events, o.objects)
	}
	return o, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range splitComma(s) {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(args []string, w io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	ctx := context.Background()
	env, err := apiservertest.New(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	var results []result
	for _, s := range systems(o.writers) {
		r, err := measure(ctx, env, s, o)
		if err != nil {
			return fmt.Errorf("%s: %w", s.label(), err)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.label(), r.Wall)
		results = append(results, r)
	}
	report(w, o, results)
	if o.jsonFile != "" {
		return writeJSON(o.jsonFile, results)
	}
	return nil
}

// result is the median burst of one system.
type result struct {
	API      string        `json:"api"`
	System   string        `json:"system"`
	Writers  int           `json:"writers,omitempty"`
	Events   int           `json:"events"`
	Wall     time.Duration `json:"wall_ns"`       // first record call until the last event is on the server
	After    time.Duration `json:"after_last_ns"` // last record call until then
	PerSec   float64       `json:"writes_per_sec"`
	Lost     int           `json:"lost"`
	Recorded time.Duration `json:"record_ns"` // first to last record call
}

func writeJSON(path string, rs []result) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			_ = f.Close()
			return err
		}
	}
	return f.Close()
}

// median returns the burst with the median wall time.
func median(rs []result) result {
	slices.SortFunc(rs, func(a, b result) int { return int(a.Wall - b.Wall) })
	return rs[len(rs)/2]
}
