// Command fanout-bench compares github.com/fanout-go/fanout with
// k8s.io/apimachinery's watch.Broadcaster and raw channels, in one process,
// and prints a table of throughput (with ratios against k8s wait q100),
// stalled-watcher cost, latency, idle memory and idle CPU, then the rate of
// recording Kubernetes events into a no-op sink with fanout's k8s/record
// against client-go's tools/record, followed by the project's performance
// targets with PASS/FAIL.
//
// Usage:
//
//	fanout-bench [-watchers 1,10,100,1000] [-producers 1,4] [-reps 7]
//	             [-duration 60ms] [-record-events 20000] [-json FILE] [-svg FILE]
//	             [-latency-producers 1,4] [-idle-pull-watchers 100000] [-record-producers 1,8]
//	             [-quick] [-only throughput,stall,latency,idle_memory,idle_cpu,replay,record]
//	             [-nats=false]
//
// The nats group (package natsbench) follows: one producer through an
// embedded NATS server to 3 subscriber connections of N = 10 and 100
// watchers, fanout's Subscriber against one NATS subscription per watcher.
// It runs unless -nats=false, or -only is given without -nats; its JSON
// lines have kind "nats".
//
// Run it with -h for the other flags.
//
// -json writes JSON Lines: one object per measured case, with the fields
// kind, label, system, strategy, api, queue, watchers, producers,
// stalled_watchers, reps, published, delivered_per_sec, spread_pct,
// ratio_vs_k8s_wait_q100, ns_per_publish, stall_ratio, allocs_per_event,
// drop_pct, p50_latency_ns, p99_latency_ns, p999_latency_ns,
// latency_samples, idle_bytes_per_watcher and idle_cpu_ms_per_sec; a
// figure that the case's kind does not measure is null. A record case has
// events/s in delivered_per_sec, ns per event in ns_per_publish and its
// ratio against client-go in ratio_vs_k8s_wait_q100. -svg draws
// delivered/s against watchers.
//
// The exit status is 0 even if a target fails (the figures are noisy);
// -strict makes a failed target exit with status 3.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/fanout-go/fanout/bench/internal/harness"
	"github.com/fanout-go/fanout/bench/internal/natsbench"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		var ex exitError
		if errors.As(err, &ex) {
			os.Exit(int(ex))
		}
		fmt.Fprintln(os.Stderr, "fanout-bench:", err)
		os.Exit(1)
	}
}

// exitError ends the command with its value as exit status, with no message.
type exitError int

func (e exitError) Error() string { return "exit status " + strconv.Itoa(int(e)) }

// intList is a flag holding a comma-separated list of positive integers.
type intList []int

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	var out intList
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// run parses args, runs the harness and writes the report to stdout and
// progress to stderr.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fanout-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := harness.DefaultConfig()
	var (
		quick      = fs.Bool("quick", false, "a smoke run of a few seconds: N=10,100, 1 producer, 3 short reps (other flags given override it)")
		watchers   = intList(def.Watchers)
		producers  = intList(def.Producers)
		latProd    = intList(def.LatencyProducers)
		recProd    = intList(def.RecordProducers)
		idlePull   = fs.Int("idle-pull-watchers", def.IdlePullWatchers, "idle watchers of the memory measurement of fanout wait pull")
		reps       = fs.Int("reps", def.Reps, "measured repetitions per case (medians are reported)")
		duration   = fs.Duration("duration", def.Target, "target time of one throughput measurement (sets the events per measurement)")
		events     = fs.Int("events", 0, "fixed events per throughput measurement instead of -duration")
		latency    = fs.Duration("latency", def.LatencyDuration, "latency measurement time per system")
		latWatch   = fs.Int("latency-watchers", def.LatencyWatchers, "watchers of the latency measurement")
		latRate    = fs.Int("latency-rate", def.LatencyRate, "events per second of the latency measurement")
		stallWatch = fs.Int("stall-watchers", def.StallWatchers, "watchers of the stalled-watcher comparison")
		idleWatch  = fs.Int("idle-watchers", def.IdleWatchers, "idle watchers of the memory measurement")
		idleCPU    = fs.Duration("idle", def.IdleCPUDuration, "idle CPU measurement time per system")
		recEvents  = fs.Int("record-events", def.RecordEvents, "Kubernetes events recorded per measurement of the k8s record comparison")
		jsonFile   = fs.String("json", "", "write the cases as JSON Lines (one object per case) to `FILE`")
		svgFile    = fs.String("svg", "", "draw delivered/s against watchers as SVG to `FILE`")
		quiet      = fs.Bool("q", false, "no progress lines on stderr")
		strict     = fs.Bool("strict", false, "exit with status 3 if a target fails")
		only       = fs.String("only", "", "comma-separated kinds of case to measure, of "+strings.Join(harness.Kinds, ","))
		natsGroup  = fs.Bool("nats", true, "run the nats group, fanout over NATS vs one NATS subscription per watcher (~12 s; off with -only unless given)")
	)
	fs.Var(&watchers, "watchers", "comma-separated watcher counts `LIST`")
	fs.Var(&producers, "producers", "comma-separated producer counts `LIST`")
	fs.Var(&latProd, "latency-producers", "comma-separated producer counts `LIST` of the latency measurement")
	fs.Var(&recProd, "record-producers", "comma-separated counts `LIST` of goroutines recording in the k8s record comparison")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	cfg := def
	if *quick {
		cfg = harness.QuickConfig()
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	apply := func(name string, f func()) {
		if set[name] {
			f()
		}
	}
	apply("watchers", func() { cfg.Watchers = watchers })
	apply("producers", func() { cfg.Producers = producers })
	apply("reps", func() { cfg.Reps = *reps })
	apply("duration", func() { cfg.Target = *duration })
	apply("events", func() { cfg.Events = *events })
	apply("latency", func() { cfg.LatencyDuration = *latency })
	apply("latency-watchers", func() { cfg.LatencyWatchers = *latWatch })
	apply("latency-rate", func() { cfg.LatencyRate = *latRate })
	apply("stall-watchers", func() { cfg.StallWatchers = *stallWatch })
	apply("idle-watchers", func() { cfg.IdleWatchers = *idleWatch })
	apply("idle", func() { cfg.IdleCPUDuration = *idleCPU })
	apply("record-events", func() { cfg.RecordEvents = *recEvents })
	apply("latency-producers", func() { cfg.LatencyProducers = latProd })
	apply("record-producers", func() { cfg.RecordProducers = recProd })
	apply("idle-pull-watchers", func() { cfg.IdlePullWatchers = *idlePull })
	apply("only", func() { cfg.Only = strings.Split(*only, ",") })

	var progress io.Writer = stderr
	if *quiet {
		progress = nil
	}
	res, err := harness.Run(cfg, progress)
	if err != nil {
		return err
	}
	natsRes, err := runNATS(*natsGroup && (!set["only"] || set["nats"]), *quick, progress)
	if err != nil {
		return err
	}
	if err := harness.WriteReport(stdout, res); err != nil {
		return err
	}
	if err := natsbench.WriteReport(stdout, natsRes); err != nil {
		return err
	}
	if *jsonFile != "" {
		if err := writeFile(*jsonFile, func(w io.Writer) error {
			if err := harness.WriteJSON(w, res); err != nil {
				return err
			}
			return natsbench.WriteJSON(w, natsRes)
		}); err != nil {
			return err
		}
	}
	if *svgFile != "" {
		if err := writeFile(*svgFile, func(w io.Writer) error { return harness.WriteChart(w, res) }); err != nil {
			return err
		}
	}
	if *strict {
		for _, t := range append(res.Targets, natsRes.Targets...) {
			if t.Status == harness.Fail {
				return exitError(3)
			}
		}
	}
	return nil
}

// runNATS runs the nats group (natsbench) if on, and returns empty results
// otherwise.
func runNATS(on, quick bool, progress io.Writer) (*natsbench.Results, error) {
	if !on {
		return &natsbench.Results{}, nil
	}
	cfg := natsbench.DefaultConfig()
	if quick {
		cfg = natsbench.QuickConfig()
	}
	return natsbench.Run(cfg, progress)
}

// writeFile creates path and fills it with write.
func writeFile(path string, write func(io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return write(f)
}
