package harness

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
)

// HeadlineSystems returns the systems of the headline run, in the column
// order of its table: k8s wait q100 (the reference), fanout wait pull and
// wait chan, [Limit], the raw-channel baseline, the peers ([Peers]) and
// fanout wait pull at kelindar's queue length ([FanoutAtKelindarQueue]):
// every lossless system the one-producer targets compare.
func HeadlineSystems() []System {
	out := []System{Reference, Fanout(StrategyWait, APIPull), Fanout(StrategyWait, APIChan), Limit, Baseline}
	return append(append(out, Peers()...), FanoutAtKelindarQueue)
}

// Headline restricts c to the headline: the throughput groups of one
// producer (at c's watcher counts), measuring [HeadlineSystems] only, and
// a report of the headline table and the targets measured. It is what
// `make bench` runs (fanout-bench -headline), about 2 minutes on 2 cores
// against about 11 for the full run.
func Headline(c Config) Config {
	c.Producers = []int{1}
	c.Only = []string{KindThroughput}
	c.Headline = true
	return c
}

// HeadlineConfig returns [DefaultConfig] restricted by [Headline]: one
// producer at N = 1, 10, 100 and 1000.
func HeadlineConfig() Config { return Headline(DefaultConfig()) }

// headlineOnly keeps of systems those of [HeadlineSystems].
func headlineOnly(systems []System) []System {
	keep := HeadlineSystems()
	return slices.DeleteFunc(slices.Clone(systems), func(s System) bool { return !slices.Contains(keep, s) })
}

// reportHeadline writes the headline table: one row per N of the
// one-producer throughput groups, one column per system of
// [HeadlineSystems] measured, each cell its delivered/s and its ratio
// against k8s wait q100. Nothing if no such case was measured.
func reportHeadline(b *strings.Builder, res *Results) error {
	var ns []int
	var cols []System
	type key struct {
		label string
		n     int
	}
	cell := map[key]Case{}
	for _, s := range HeadlineSystems() {
		for _, c := range casesOf(res.Cases, KindThroughput) {
			if c.Producers != 1 || c.StalledWatchers != 0 || !is(&c, s) {
				continue
			}
			if !slices.Contains(cols, s) {
				cols = append(cols, s)
			}
			if !slices.Contains(ns, c.Watchers) {
				ns = append(ns, c.Watchers)
			}
			cell[key{s.Label(), c.Watchers}] = c
		}
	}
	if len(cols) == 0 {
		return nil
	}
	slices.Sort(ns)
	fmt.Fprintf(b, "\n== headline: 1 producer, lossless, delivered values/s (× k8s wait q100, the median of per-repetition ratios) ==\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "N"
	for _, s := range cols {
		head += "\t" + s.Label()
	}
	fmt.Fprintf(tw, "%s\t\n", head)
	for _, n := range ns {
		row := fmt.Sprint(n)
		for _, s := range cols {
			c, ok := cell[key{s.Label(), n}]
			switch {
			case !ok:
				row += "\t-"
			case s == Reference:
				row += "\t" + num(c.DeliveredPerSec, FormatRate)
			default:
				row += fmt.Sprintf("\t%s (%s)", num(c.DeliveredPerSec, FormatRate), FormatRatio(c.RatioVsK8s))
			}
		}
		fmt.Fprintf(tw, "%s\t\n", row)
	}
	return tw.Flush()
}

// reportHeadlineTargets writes, for a headline run, the targets it
// measured with PASS or FAIL, how many need the full run, and how to run
// everything.
func reportHeadlineTargets(b *strings.Builder, res *Results) error {
	b.WriteString("\n== targets measured by the headline ==\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	pass, measured := 0, 0
	for _, t := range res.Targets {
		if t.Status == NA {
			continue
		}
		measured++
		if t.Status == Pass {
			pass++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Status, t.Name, t.Want, t.Measured)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(b, "%d of %d targets met; the other %d need the full run\n", pass, measured, len(res.Targets)-measured)
	b.WriteString("\nThis was the headline. Everything (4 producers, lossy strategies, batches, topics, filters, latency, idle memory\n")
	b.WriteString("and CPU, replay, Kubernetes events, NATS and all the targets): make bench-full, about 11 minutes on 2 cores\n")
	b.WriteString("(in bench/: go run ./cmd/fanout-bench, without -headline).\n")
	return nil
}
