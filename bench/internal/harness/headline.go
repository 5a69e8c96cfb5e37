package harness

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
)

// HeadlineSystems returns the systems of the headline run, in the column
// order of its table (the README's): k8s wait q100 (the reference), fanout
// wait pull, [Limit], fanout wait chan, the raw-channel baseline, the peers
// ([Peers]) and fanout wait pull at kelindar's queue length and at
// go-disruptor's ring length ([FanoutAtKelindarQueue],
// [FanoutAtDisruptorRing]): every lossless system the one-producer targets
// compare.
func HeadlineSystems() []System {
	out := []System{Reference, Fanout(StrategyWait, APIPull), Limit, Fanout(StrategyWait, APIChan), Baseline}
	return append(append(out, Peers()...), atPeerQueues()...)
}

// Headline restricts c to the headline: the throughput groups of one
// producer (at c's watcher counts), measuring [HeadlineSystems] only, and
// a report of the headline table and the targets measured. It is what
// `make bench` runs (fanout-bench -headline), about 3 minutes on 2 cores
// against about 26 for the full run.
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

// headlineColumn is a column of the headline table: a system, its
// heading, and the ratio shown beside its rate, if any.
type headlineColumn struct {
	sys   System
	head  string
	ratio func(c Case, row map[System]Case) *float64
}

// headlineColumns returns the columns of the headline table: each system
// of [HeadlineSystems] with its ratio against k8s wait q100, but limit's
// column gives fanout wait pull over limit, fanout at a peer's queue
// length is set against that peer (a ratio of medians), and k8s and the
// peers show their rate alone, as in the README.
func headlineColumns() []headlineColumn {
	pull := Fanout(StrategyWait, APIPull)
	vsK8s := func(c Case, _ map[System]Case) *float64 { return c.RatioVsK8s }
	var out []headlineColumn
	for _, s := range HeadlineSystems() {
		col := headlineColumn{sys: s, head: s.Label()}
		switch {
		case s == Limit:
			col.head += " (fanout pull / limit)"
			col.ratio = func(_ Case, row map[System]Case) *float64 { return row[pull].RatioVsLimit }
		case s == FanoutAtKelindarQueue:
			col.head += " (/ kelindar)"
			col.ratio = againstPeer(Kelindar)
		case s == FanoutAtDisruptorRing:
			col.head += " (/ disruptor)"
			col.ratio = againstPeer(Disruptor)
		case s.Name == SystemFanout || s == Baseline:
			col.head += " (× k8s)"
			col.ratio = vsK8s
		}
		out = append(out, col)
	}
	return out
}

// againstPeer returns the ratio of a headline cell against peer's cell of
// the same row (nil if either rate is missing).
func againstPeer(peer System) func(c Case, row map[System]Case) *float64 {
	return func(c Case, row map[System]Case) *float64 {
		k, ok := row[peer]
		if !ok || c.DeliveredPerSec == nil || k.DeliveredPerSec == nil {
			return nil
		}
		return ptr(*c.DeliveredPerSec / *k.DeliveredPerSec)
	}
}

// reportHeadline writes the headline table: one row per N of the
// one-producer throughput groups, one column per system of
// [HeadlineSystems] measured (see [headlineColumns]). Nothing if no such
// case was measured.
func reportHeadline(b *strings.Builder, res *Results) error {
	rows := map[int]map[System]Case{}
	var ns []int
	var cols []headlineColumn
	for _, col := range headlineColumns() {
		found := false
		for _, c := range casesOf(res.Cases, KindThroughput) {
			if c.Producers != 1 || c.StalledWatchers != 0 || !is(&c, col.sys) {
				continue
			}
			if rows[c.Watchers] == nil {
				rows[c.Watchers] = map[System]Case{}
				ns = append(ns, c.Watchers)
			}
			rows[c.Watchers][col.sys], found = c, true
		}
		if found {
			cols = append(cols, col)
		}
	}
	if len(cols) == 0 {
		return nil
	}
	slices.Sort(ns)
	b.WriteString("\n== headline: 1 producer, lossless, delivered values/s; in parentheses the ratio its heading names ")
	b.WriteString("(× k8s: the median of per-repetition ratios) ==\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "N"
	for _, col := range cols {
		head += "\t" + col.head
	}
	fmt.Fprintf(tw, "%s\t\n", head)
	for _, n := range ns {
		line := fmt.Sprint(n)
		for _, col := range cols {
			c, ok := rows[n][col.sys]
			switch {
			case !ok:
				line += "\t-"
			case col.ratio == nil:
				line += "\t" + num(c.DeliveredPerSec, FormatRate)
			default:
				line += fmt.Sprintf("\t%s (%s)", num(c.DeliveredPerSec, FormatRate), FormatRatio(col.ratio(c, rows[n])))
			}
		}
		fmt.Fprintf(tw, "%s\t\n", line)
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
	b.WriteString("and CPU, replay, Kubernetes events, NATS and all the targets): make bench-full, about 32 minutes on 2 cores\n")
	b.WriteString("(in bench/: go run ./cmd/fanout-bench, without -headline).\n")
	return nil
}
