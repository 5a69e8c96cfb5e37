// Command fanout-bench compares github.com/fanout-go/fanout with
// k8s.io/apimachinery's watch.Broadcaster and raw channels, in one process,
// and prints a table of throughput (with ratios against k8s wait q100),
// stalled-watcher cost, topics (fanout Topics against one Broadcaster per
// topic by hand, kelindar/event by type, cskr/pubsub and watermill's
// GoChannel), filters (WithFilter against discarding by hand),
// latency, idle memory and idle CPU, then the rate of
// recording Kubernetes events into a no-op sink with fanout's k8s/record
// against client-go's tools/record and with k8s/events against
// tools/events, followed by the project's performance targets with
// PASS/FAIL.
//
// Usage:
//
//	fanout-bench [-headline] [-watchers 1,10,100,1000] [-producers 1,4] [-reps 5]
//	             [-duration 60ms] [-record-events 20000] [-json FILE] [-svg FILE]
//	             [-latency-producers 1,4] [-idle-pull-watchers 100000] [-record-producers 1,8]
//	             [-topics 1,10,100,1000] [-working-watchers 1,10,100,1000] [-quick]
//	             [-only throughput,working,stall,topics,filter,latency,idle_memory,idle_cpu,replay,record,events]
//	             [-nats=false]
//
// The nats group (package natsbench) follows: one producer through an
// embedded NATS server to 3 subscriber connections of N = 10 and 100
// watchers, fanout's Subscriber (unframed and in frames) against one NATS
// subscription per watcher; then the latency of a Forwarder, unframed and
// framed, and a durable JetStream Consume into lossless watchers. It runs
// unless -nats=false, or -only is given without -nats; its JSON lines have
// kinds "nats", "nats_latency" and "nats_jetstream".
//
// -headline (what `make bench` runs, about 3 minutes on 2 cores) measures
// only the one-producer throughput groups, and of them only the lossless
// systems the headline compares (harness.HeadlineSystems: fanout read with
// Recv and through ResultChan, k8s wait q100, the limit ring, raw channels,
// the peers and fanout at kelindar's queue length); it prints the headline
// table, the targets those cases measure and how to run everything. The
// full run, without it, is `make bench-full` (about 32 minutes).
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
// ratio against client-go in ratio_vs_k8s_wait_q100; an events case the
// same (its ratio in ratio_vs_client_go) and the most goroutines seen while
// recording in peak_goroutines. -svg draws
// delivered/s against watchers; a run without a one-producer throughput
// case (-only record, say) writes no chart and says so. Both create the
// file's directory if needed and print where the file went.
//
// The exit status is 0 when the run completed, even if a target fails (the
// figures are noisy); -strict makes a failed target exit with status 3, for
// CI. -h prints the flags and exits 0; a bad flag exits 2 after the usage,
// and any other error 1.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/fanout-go/fanout/bench/internal/harness"
	"github.com/fanout-go/fanout/bench/internal/natsbench"
)

func main() {
	os.Exit(exitCode(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

// exitCode returns the exit status for run's error, and writes the error
// to stderr unless it was written already: 0 for none and for -h (the
// usage was printed), the flag package's 2 for a bad flag (printed with
// the usage), an [exitError]'s own status, and 1 for any other error.
func exitCode(err error, stderr io.Writer) int {
	var ex exitError
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ex):
		return int(ex)
	case errors.As(err, &usage):
		return 2
	}
	fmt.Fprintln(stderr, "fanout-bench:", err)
	return 1
}

// exitError ends the command with its value as exit status, with no message.
type exitError int

func (e exitError) Error() string { return "exit status " + strconv.Itoa(int(e)) }

// usageError is a bad command line that the flag package has already
// reported, with the usage.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

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
	o, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	var progress io.Writer = stderr
	if o.quiet {
		progress = nil
	}
	stop, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	res, err := harness.Run(o.cfg, progress)
	if serr := stop(); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	natsRes, err := runNATS(o.nats, o.quick, progress)
	if err != nil {
		return err
	}
	if err := writeOutputs(stdout, o, res, natsRes); err != nil {
		return err
	}
	if o.strict {
		for _, t := range append(res.Targets, natsRes.Targets...) {
			if t.Status == harness.Fail {
				return exitError(3)
			}
		}
	}
	return nil
}

// startCPUProfile starts writing a CPU profile of the measurements to
// file, if not empty, and returns what stops it and closes the file.
func startCPUProfile(file string) (stop func() error, err error) {
	if file == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// options is what the command line asked for.
type options struct {
	cfg                  harness.Config
	quick, quiet, strict bool
	nats                 bool // run the nats group
	jsonFile, svgFile    string
	cpuProfile           string // write a CPU profile of the run to this file
}

// flags are the command's flags, as parsed.
type flags struct {
	quick, headline, quiet, strict, nats      *bool
	watchers, producers, latProd, recProd     intList
	topics, working                           intList
	idlePull, reps, events, latWatch, latRate *int
	stallWatch, idleWatch, recEvents, latHigh *int
	schedRuns                                 *int
	duration, latency, idleCPU                *time.Duration
	jsonFile, svgFile, only, cpuProfile       *string
}

// register declares the flags on fs, with def's values as defaults.
func (f *flags) register(fs *flag.FlagSet, def harness.Config) {
	f.watchers, f.producers = intList(def.Watchers), intList(def.Producers)
	f.latProd, f.recProd = intList(def.LatencyProducers), intList(def.RecordProducers)
	f.topics, f.working = intList(def.TopicCounts), intList(def.WorkingWatchers)
	f.quick = fs.Bool("quick", false, "a smoke run of about 30 s on 2 cores: N=10,100, 1 producer, 3 short reps (other flags given override it)")
	f.headline = fs.Bool("headline", false, "the headline only (make bench, about 2 min on 2 cores): 1 producer, fanout vs k8s, limit, raw channels and the peers, their targets; no nats group unless -nats is given")
	f.idlePull = fs.Int("idle-pull-watchers", def.IdlePullWatchers, "idle watchers of the memory measurement of fanout wait pull")
	f.reps = fs.Int("reps", def.Reps, "measured repetitions per case (medians are reported)")
	f.duration = fs.Duration("duration", def.Target, "target time of one throughput measurement (sets the events per measurement)")
	f.events = fs.Int("events", 0, "fixed events per throughput measurement instead of -duration")
	f.latency = fs.Duration("latency", def.LatencyDuration, "latency measurement time per system")
	f.latWatch = fs.Int("latency-watchers", def.LatencyWatchers, "watchers of the latency measurement")
	f.latRate = fs.Int("latency-rate", def.LatencyRate, "events per second of the latency measurement")
	f.latHigh = fs.Int("latency-high-rate", def.LatencyHighRate, "events per second of the high-rate latency measurement, 1 producer (0: none)")
	f.schedRuns = fs.Int("scheduler-runs", def.SchedulerRuns, "runs the scheduler-bound targets (p99 against k8s, 4 producers / 1, events with 8) are judged on, the median")
	f.stallWatch = fs.Int("stall-watchers", def.StallWatchers, "watchers of the stalled-watcher comparison")
	f.idleWatch = fs.Int("idle-watchers", def.IdleWatchers, "idle watchers of the memory measurement")
	f.idleCPU = fs.Duration("idle", def.IdleCPUDuration, "idle CPU measurement time per system")
	f.recEvents = fs.Int("record-events", def.RecordEvents, "Kubernetes events recorded per measurement of the k8s record and events comparisons")
	f.jsonFile = fs.String("json", "", "write the cases as JSON Lines (one object per case) to `FILE`")
	f.svgFile = fs.String("svg", "", "draw delivered/s against watchers as SVG to `FILE`")
	f.cpuProfile = fs.String("cpuprofile", "", "write a CPU profile of the measurements (not the nats group) to `FILE`, for go tool pprof; the throughput, filter, working-reader, topics, record and events samples carry the label system=<label>, for -tagfocus")
	f.quiet = fs.Bool("q", false, "no progress lines on stderr")
	f.strict = fs.Bool("strict", false, "exit with status 3 if a target fails")
	f.only = fs.String("only", "", "comma-separated kinds of case to measure, of "+strings.Join(harness.Kinds, ","))
	f.nats = fs.Bool("nats", true, "run the nats group, fanout over NATS vs one NATS subscription per watcher, frames, latency, JetStream (~25 s; off with -only unless given)")
	fs.Var(&f.watchers, "watchers", "comma-separated watcher counts `LIST`")
	fs.Var(&f.producers, "producers", "comma-separated producer counts `LIST`")
	fs.Var(&f.latProd, "latency-producers", "comma-separated producer counts `LIST` of the latency measurement")
	fs.Var(&f.topics, "topics", "comma-separated topic counts `LIST` of the topics group, 10 watchers per topic")
	fs.Var(&f.working, "working-watchers", "comma-separated watcher counts `LIST` of the working-reader group (readers checking the order)")
	fs.Var(&f.recProd, "record-producers", "comma-separated counts `LIST` of goroutines recording in the k8s record and events comparisons")
}

// apply sets in cfg the fields whose flags set names.
func (f *flags) apply(cfg *harness.Config, set map[string]bool) {
	for name, fn := range map[string]func(){
		"watchers":           func() { cfg.Watchers = f.watchers },
		"producers":          func() { cfg.Producers = f.producers },
		"reps":               func() { cfg.Reps = *f.reps },
		"duration":           func() { cfg.Target = *f.duration },
		"events":             func() { cfg.Events = *f.events },
		"latency":            func() { cfg.LatencyDuration = *f.latency },
		"latency-watchers":   func() { cfg.LatencyWatchers = *f.latWatch },
		"latency-rate":       func() { cfg.LatencyRate = *f.latRate },
		"latency-high-rate":  func() { cfg.LatencyHighRate = *f.latHigh },
		"scheduler-runs":     func() { cfg.SchedulerRuns = *f.schedRuns },
		"stall-watchers":     func() { cfg.StallWatchers = *f.stallWatch },
		"idle-watchers":      func() { cfg.IdleWatchers = *f.idleWatch },
		"idle":               func() { cfg.IdleCPUDuration = *f.idleCPU },
		"record-events":      func() { cfg.RecordEvents = *f.recEvents },
		"latency-producers":  func() { cfg.LatencyProducers = f.latProd },
		"record-producers":   func() { cfg.RecordProducers = f.recProd },
		"topics":             func() { cfg.TopicCounts = f.topics },
		"working-watchers":   func() { cfg.WorkingWatchers = f.working },
		"idle-pull-watchers": func() { cfg.IdlePullWatchers = *f.idlePull },
		"only":               func() { cfg.Only = strings.Split(*f.only, ",") },
	} {
		if set[name] {
			fn()
		}
	}
}

// parseArgs turns the command line into options: the harness's defaults
// (or -quick's), overridden by each flag given.
func parseArgs(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("fanout-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f flags
	f.register(fs, harness.DefaultConfig())
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return options{}, err
		}
		return options{}, usageError{err}
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := harness.DefaultConfig()
	if *f.quick {
		cfg = harness.QuickConfig()
	}
	if *f.headline {
		cfg = harness.Headline(cfg)
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	f.apply(&cfg, set)
	return options{
		cfg: cfg, quick: *f.quick, quiet: *f.quiet, strict: *f.strict,
		nats:     *f.nats && (!set["only"] && !*f.headline || set["nats"]),
		jsonFile: *f.jsonFile, svgFile: *f.svgFile, cpuProfile: *f.cpuProfile,
	}, nil
}

// writeOutputs writes the report to stdout, and the JSON and chart files
// if asked for.
func writeOutputs(stdout io.Writer, o options, res *harness.Results, natsRes *natsbench.Results) error {
	if err := harness.WriteReport(stdout, res); err != nil {
		return err
	}
	if err := natsbench.WriteReport(stdout, natsRes); err != nil {
		return err
	}
	if o.jsonFile != "" {
		if err := writeFile(stdout, "JSON", o.jsonFile, func(w io.Writer) error {
			if err := harness.WriteJSON(w, res); err != nil {
				return err
			}
			return natsbench.WriteJSON(w, natsRes)
		}); err != nil {
			return err
		}
	}
	if o.svgFile != "" {
		// Drawn first, so that a run with nothing to draw (-only without
		// throughput, or no one-producer group) completes without an empty
		// file: it says so instead.
		var chart bytes.Buffer
		if err := harness.WriteChart(&chart, res); errors.Is(err, harness.ErrNothingToChart) {
			_, err = fmt.Fprintf(stdout, "chart not written to %s: no one-producer throughput case in this run\n", o.svgFile)
			return err
		} else if err != nil {
			return err
		}
		return writeFile(stdout, "chart", o.svgFile, func(w io.Writer) error {
			_, err := w.Write(chart.Bytes())
			return err
		})
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

// writeFile creates path (and its directory) and fills it with write, then
// tells stdout where the file went.
func writeFile(stdout io.Writer, what, path string, write func(io.Writer) error) (err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			if abs, aerr := filepath.Abs(path); aerr == nil {
				path = abs
			}
			_, err = fmt.Fprintf(stdout, "%s written to %s\n", what, path)
		}
	}()
	return write(f)
}
