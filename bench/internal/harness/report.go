package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// FormatRate renders a per-second figure with an SI suffix, e.g. "12.3M".
func FormatRate(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// FormatRatio renders a ratio as "13.2×"; "-" if nil.
func FormatRatio(r *float64) string {
	if r == nil {
		return "-"
	}
	if *r < 10 {
		return fmt.Sprintf("%.2f×", *r)
	}
	return fmt.Sprintf("%.1f×", *r)
}

// num formats *p with format, or returns "-" if p is nil.
func num[T any](p *T, format func(T) string) string {
	if p == nil {
		return "-"
	}
	return format(*p)
}

// f returns a formatter of float64 with a Printf format.
func f(format string) func(float64) string {
	return func(v float64) string { return fmt.Sprintf(format, v) }
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// formatNs renders nanoseconds as microseconds.
func formatNs(ns int64) string { return fmt.Sprintf("%.1fµs", float64(ns)/1e3) }

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// WriteReport writes the human-readable report of res: the headline table
// (one producer, [HeadlineSystems]), throughput tables grouped by producers
// and N with ratios against k8s wait q100, then the stalled-watcher,
// latency, idle-memory, idle-CPU, replay and k8s record tables, any
// warnings and the targets with PASS/FAIL. For a [Headline] run, only the
// headline table, any warnings and the targets it measured.
func WriteReport(w io.Writer, res *Results) error {
	var b strings.Builder
	sections := []func(*strings.Builder, *Results) error{
		reportHeader, reportHeadline, reportThroughput, reportWorking, reportStall, reportTopics, reportFilter, reportLatency, reportIdleMemory,
		reportIdleCPU, reportReplay, reportRecord, reportEvents, reportReruns, reportWarnings, reportTargets,
	}
	if res.Config.Headline {
		sections = []func(*strings.Builder, *Results) error{reportHeader, reportHeadline, reportWarnings, reportHeadlineTargets}
	}
	for _, section := range sections {
		if err := section(&b, res); err != nil {
			return err
		}
	}
	fmt.Fprintf(&b, "\nrun took %s\n", res.Elapsed.Round(100*time.Millisecond))
	_, err := io.WriteString(w, b.String())
	return err
}

func reportHeader(b *strings.Builder, res *Results) error {
	fmt.Fprintf(b, "fanout benchmark harness: one process, systems interleaved (order rotated per repetition), medians of %d repetitions\n", res.Config.Reps)
	fmt.Fprintf(b, "%s\n", res.Machine)
	fmt.Fprintf(b, "workload: queue %d per watcher, payload one preallocated *Event pointer, each watcher drained by its own goroutine doing no work;\n", DefaultQueue)
	b.WriteString("          delivered/s = values received by all watchers / (first publish → last consumer done), from the difference of a long and a short run measured\n")
	b.WriteString("          back to back (the short one past the system's warm-up, found by calibration), so that start-up, warm-up and teardown cancel; ns/publish = that time / values published;\n")
	b.WriteString("          vs k8s = median of per-repetition ratios; allocs/event = Mallocs while the 2nd half is published / its values, least of the reps; spread = (max-min)/median of delivered/s\n")
	fmt.Fprintf(b, "          b%d = ActionBatch of %d values per call; peers: teivah = github.com/teivah/broadcast Relay.Notify to Listener channels,\n", DefaultBatch, DefaultBatch)
	fmt.Fprintf(b, "          kelindar = github.com/kelindar/event Publish to Subscribe handlers (queue %d, fixed; woken by a 500 µs ticker);\n", KelindarQueue)
	fmt.Fprintf(b, "          disruptor = github.com/smarty/go-disruptor, ring %d, one handler per watcher, readers and writer yielding (never parked);\n", DisruptorRing)
	b.WriteString("          cskr = github.com/cskr/pubsub/v2, every watcher on one topic (working readers and latency);\n")
	fmt.Fprintf(b, "          fanout wait pull q%d = fanout at kelindar's queue length, its readers taking up to %d values per Recv; fanout wait pull q%d = fanout at disruptor's ring length\n", KelindarQueue, MaxReadBatch, DisruptorRing)
	b.WriteString("          (the peer targets compare each peer with fanout at its queue length)\n")
	return nil
}

// reportThroughput writes one table per (N, producers) group, in the order
// measured.
func reportThroughput(b *strings.Builder, res *Results) error {
	type group struct{ n, p int }
	var groups []group
	byGroup := map[group][]Case{}
	for _, c := range casesOf(res.Cases, KindThroughput) {
		g := group{c.Watchers, c.Producers}
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], c)
	}
	for _, g := range groups {
		fmt.Fprintf(b, "\n== throughput: %s, %s ==\n", plural(g.n, "watcher"), plural(g.p, "producer"))
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		head, labels := padLabels(byGroup[g])
		fmt.Fprintf(tw, "%s\tdelivered/s\tvs k8s wait q100\tvs limit\tns/publish\tallocs/event\tdrop %%\tspread\tevents long/short\t\n", head)
		for i, c := range byGroup[g] {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t\n", labels[i], num(c.DeliveredPerSec, FormatRate),
				FormatRatio(c.RatioVsK8s), FormatRatio(c.RatioVsLimit), num(c.NsPerPublish, f("%.1f")), num(c.AllocsPerEvent, f("%.4f")),
				num(c.DropPct, f("%.1f")), num(c.SpreadPct, f("%.0f%%")), c.Published, c.ShortPublished)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func reportStall(b *strings.Builder, res *Results) error {
	cs := casesOf(res.Cases, KindStall)
	if len(cs) == 0 {
		return nil
	}
	fmt.Fprintf(b, "\n== stalled watcher: %s, one never read, 1 producer ==\n", plural(cs[0].Watchers, "watcher"))
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head, labels := padLabels(cs)
	fmt.Fprintf(tw, "%s\tproducer ns/publish\tstalled\tstalled / not\tns/publish e2e\tstalled\tdrop %% stalled\tallocs/event stalled\t\n", head)
	for i := 0; i+1 < len(cs); i += 2 {
		free, st := cs[i], cs[i+1]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", labels[i],
			num(free.ProducerNsPerPublish, f("%.1f")), num(st.ProducerNsPerPublish, f("%.1f")), FormatRatio(st.StallRatio),
			num(free.NsPerPublish, f("%.1f")), num(st.NsPerPublish, f("%.1f")), num(st.DropPct, f("%.1f")),
			num(st.AllocsPerEvent, f("%.4f")))
	}
	return tw.Flush()
}

// reportTopics writes one table per topic count and producers.
func reportTopics(b *strings.Builder, res *Results) error {
	return reportTopicGroups(b, res) // topics.go
}

func reportFilter(b *strings.Builder, res *Results) error {
	cs := casesOf(res.Cases, KindFilter)
	if len(cs) == 0 {
		return nil
	}
	fmt.Fprintf(b, "\n== filter: %s, watcher i keeping the values v with v%%%d == i%%%d, 1 producer, lossless; delivered/s counts kept values ==\n",
		plural(cs[0].Watchers, "watcher"), FilterShare, FilterShare)
	return rateTable(b, cs, "vs by hand", func(c Case) *float64 { return c.RatioVsByHand })
}

// rateTable writes the delivered/s table of a topics or filter group,
// with the ratio that ratio returns.
func rateTable(b *strings.Builder, cs []Case, ratioHead string, ratio func(Case) *float64) error {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head, labels := padLabels(cs)
	fmt.Fprintf(tw, "%s\tdelivered/s\t%s\tns/publish\tallocs/event\tspread\tevents long/short\t\n", head, ratioHead)
	for i, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t\n", labels[i], num(c.DeliveredPerSec, FormatRate), FormatRatio(ratio(c)),
			num(c.NsPerPublish, f("%.1f")), num(c.AllocsPerEvent, f("%.2f")), num(c.SpreadPct, f("%.0f%%")), c.Published, c.ShortPublished)
	}
	return tw.Flush()
}

// reportLatency writes one table per number of producers and rate.
func reportLatency(b *strings.Builder, res *Results) error {
	for _, cs := range byProducersAndRate(casesOf(res.Cases, KindLatency)) {
		c0 := cs[0]
		fmt.Fprintf(b, "\n== publish→receive latency: %s, %s, %d events/s in all, %.1f s per system ==\n",
			plural(c0.Watchers, "watcher"), plural(c0.Producers, "producer"), c0.LatencyRate, res.Config.LatencyDuration.Seconds())
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		head, labels := padLabels(cs)
		fmt.Fprintf(tw, "%s\tp50\tp99\tp99.9\tsamples\tmedian of %d runs' p99\tpublished/s\t\n", head, c0.Reps)
		for i, c := range cs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", labels[i], num(c.P50LatencyNs, formatNs), num(c.P99LatencyNs, formatNs),
				num(c.P999LatencyNs, formatNs), num(c.LatencySamples, itoa), num(c.MedianRunP99LatencyNs, formatNs),
				num(c.PublishedPerSec, FormatRate))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// byProducersAndRate splits latency cases into runs of the same producers
// and rate, in order.
func byProducersAndRate(cases []Case) [][]Case {
	return splitWhere(cases, func(a, b Case) bool { return a.Producers != b.Producers || a.LatencyRate != b.LatencyRate })
}

func reportIdleMemory(b *strings.Builder, res *Results) error {
	cs := casesOf(res.Cases, KindIdleMemory)
	if len(cs) == 0 {
		return nil
	}
	b.WriteString("\n== idle memory: watchers nobody reads, HeapAlloc+StackInuse with the watchers less after teardown, after GC, per watcher (goroutines the system starts included) ==\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head, labels := padLabels(cs)
	fmt.Fprintf(tw, "%s\twatchers\tbytes/watcher\t\n", head)
	for i, c := range cs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t\n", labels[i], c.Watchers, num(c.IdleBytesPerWatcher, f("%.0f")))
	}
	return tw.Flush()
}

func reportIdleCPU(b *strings.Builder, res *Results) error {
	cs := casesOf(res.Cases, KindIdleCPU)
	if len(cs) == 0 {
		return nil
	}
	fmt.Fprintf(b, "\n== idle CPU: %s parked, process CPU over %s per system, the lowest of %d rounds ==\n",
		plural(res.Config.IdleCPUWatchers, "watcher"), res.Config.IdleCPUDuration, IdleCPURounds)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head, labels := padLabels(cs)
	fmt.Fprintf(tw, "%s\tCPU ms/s\t\n", head)
	for i, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t\n", labels[i], num(c.IdleCPUMsPerSec, f("%.3f")))
	}
	return tw.Flush()
}

func reportReplay(b *strings.Builder, res *Results) error {
	cs := casesOf(res.Cases, KindReplay)
	if len(cs) == 0 {
		return nil
	}
	fmt.Fprintf(b, "\n== replay: a late joiner starts with the last %d values of a history of %d (%d published): register + read them all ==\n",
		cs[0].Replay, cs[0].History, 2*cs[0].History)
	b.WriteString("   fanout WithReplay: WithHistory on the broadcaster; WatchWithPrefix: the application keeps the history in a ring under its own lock\n")
	b.WriteString("   (publish + remember, copy + register); fanout read with Recv, k8s from ResultChan; Stop not timed; vs k8s = median of per-repetition ratios\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head, labels := padLabels(cs)
	fmt.Fprintf(tw, "%s\tvalues/s\tvs k8s\tns/value\tallocs/value\tspread\tvalues/rep\t\n", head)
	for i, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", labels[i], num(c.DeliveredPerSec, FormatRate), FormatRatio(c.RatioVsK8s),
			num(c.NsPerReplayedValue, f("%.1f")), num(c.AllocsPerEvent, f("%.4f")), num(c.SpreadPct, f("%.0f%%")), c.Published)
	}
	return tw.Flush()
}

// reportRecord writes one table per number of recording goroutines.
func reportRecord(b *strings.Builder, res *Results) error {
	for _, cs := range byProducers(casesOf(res.Cases, KindRecord)) {
		c0 := cs[0]
		fmt.Fprintf(b, "\n== k8s record: %d events about %d pods into a no-op sink, %s, recorded in rounds of %d, each waited for ==\n",
			c0.Published, RecordPods, plural(c0.Producers, "producer"), RecordBatch)
		if c0.Producers > 1 {
			b.WriteString("   each producer records about its own pods, concurrently; the calls about each pod are checked too\n")
		}
		fmt.Fprintf(b, "   same type/reason/message, spam filter off (BurstSize 1<<30); sink calls per repetition, the same for all (checked): %d Create + %d Patch\n",
			c0.SinkCreates, c0.SinkPatches)
		b.WriteString("   events/s = events / (first Event call → the sink has seen the last); vs client-go = median of per-repetition ratios\n")
		b.WriteString("   GCs/10k = GC cycles per 10,000 events of the counted half; heap = in use as it began (the collector runs more often in a small heap)\n")
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		head, labels := padLabels(cs)
		fmt.Fprintf(tw, "%s\tevents/s\tvs client-go\tns/event\tallocs/event\tGCs/10k\theap\tspread\tevents/rep\t\n", head)
		for i, c := range cs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", labels[i], num(c.DeliveredPerSec, FormatRate),
				FormatRatio(c.RatioVsClientGo), num(c.NsPerPublish, f("%.0f")), num(c.AllocsPerEvent, f("%.1f")),
				num(c.GCsPer10kEvents, f("%.1f")), num(c.HeapMB, f("%.0f MiB")), num(c.SpreadPct, f("%.0f%%")), c.Published)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func reportWarnings(b *strings.Builder, res *Results) error {
	if len(res.Warnings) > 0 {
		b.WriteString("\n== warnings ==\n")
		for _, w := range res.Warnings {
			fmt.Fprintf(b, "  %s\n", w)
		}
	}
	return nil
}

func reportTargets(b *strings.Builder, res *Results) error {
	if len(res.Targets) == 0 {
		return nil
	}
	b.WriteString("\n== targets ==\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	pass := 0
	for _, t := range res.Targets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Status, t.Name, t.Want, t.Measured)
		if t.Status == Pass {
			pass++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(b, "%d of %d targets met\n", pass, len(res.Targets))
	return nil
}

// byProducers splits cases into runs of the same producers, in order.
func byProducers(cases []Case) [][]Case {
	return splitWhere(cases, func(a, b Case) bool { return a.Producers != b.Producers })
}

// splitWhere splits cases into runs, a new run starting wherever a case
// differs from the one before it.
func splitWhere(cases []Case, differ func(prev, c Case) bool) [][]Case {
	var out [][]Case
	for i, c := range cases {
		if i == 0 || differ(cases[i-1], c) {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], c)
	}
	return out
}

// padLabels returns the labels of cases left-aligned to a common width,
// and the header "system" padded likewise, so that a right-aligned
// tabwriter keeps the first column left-aligned.
func padLabels(cases []Case) (header string, labels []string) {
	width := len("system")
	for _, c := range cases {
		width = max(width, len(c.Label))
	}
	for _, c := range cases {
		labels = append(labels, fmt.Sprintf("%-*s", width, c.Label))
	}
	return fmt.Sprintf("%-*s", width, "system"), labels
}

func casesOf(cases []Case, kind string) []Case {
	var out []Case
	for _, c := range cases {
		if c.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

// WriteJSON writes the cases of res as JSON Lines: one JSON object per case
// (see [Case] for the fields), in report order, then the reruns (field
// run 2 and up).
func WriteJSON(w io.Writer, res *Results) error {
	enc := json.NewEncoder(w)
	for _, c := range append(slices.Clone(res.Cases), res.Reruns...) {
		if err := enc.Encode(c); err != nil {
			return err
		}
	}
	return nil
}

// ReadCases reads the JSON Lines [WriteJSON] writes back into cases, the
// reruns among them. Lines of other kinds in the same file (the nats
// group's) are kept as cases of their kind, which no table or target
// reads.
func ReadCases(r io.Reader) ([]Case, error) {
	dec := json.NewDecoder(r)
	var cases []Case
	for {
		var c Case
		switch err := dec.Decode(&c); {
		case errors.Is(err, io.EOF):
			return cases, nil
		case err != nil:
			return cases, fmt.Errorf("case %d: %w", len(cases)+1, err)
		}
		cases = append(cases, c)
	}
}
