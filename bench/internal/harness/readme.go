package harness

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// WriteReadmeTables writes, in Markdown, the tables the project's README
// shows, from the cases of one run (a run's JSON Lines, [ReadCases]): the
// readers that do nothing (one producer, throughput), the readers that
// work, the latency of every system and the topics, then how many targets
// the run met and each one it missed. A table whose group the run did not
// measure is left out; a cell the run did not measure is "–".
//
// Every figure is the harness's own: delivered/s of the case; in
// parentheses the median of per-repetition ratios the harness computed for
// that comparison (fanout over k8s, over limit, over a peer), except fanout
// at go-disruptor's ring length over go-disruptor, which is the ratio of
// the two delivered/s as its target takes it. Latency cells are p50 of all
// samples / the median over the runs of each run's p99 (the figure the
// latency targets judge), with the rate the producer achieved in brackets
// where it could not keep to the rate asked.
func WriteReadmeTables(w io.Writer, cases []Case) error {
	first := slices.DeleteFunc(slices.Clone(cases), func(c Case) bool { return c.Run > 1 })
	var b strings.Builder
	headlineMarkdown(&b, first)
	workingMarkdown(&b, first)
	latencyMarkdown(&b, first)
	topicsMarkdown(&b, first)
	targetsMarkdown(&b, EvaluateTargets(cases))
	_, err := io.WriteString(w, b.String())
	return err
}

// mdTable is a Markdown table being built: a header, then rows.
type mdTable struct {
	head []string
	rows [][]string
}

// write writes t with the first column left-aligned and the rest
// right-aligned; nothing if t has no row.
func (t mdTable) write(b *strings.Builder, title string) {
	if len(t.rows) == 0 {
		return
	}
	fmt.Fprintf(b, "%s\n\n| %s |\n|---|%s\n", title, strings.Join(t.head, " | "), strings.Repeat("---:|", len(t.head)-1))
	for _, r := range t.rows {
		fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
	}
	b.WriteString("\n")
}

// caseOf returns the case of the given kind and label with n watchers
// (topics, for the topics kind) and the given producers, or nil.
func caseOf(cases []Case, kind, label string, n, producers int) *Case {
	for i := range cases {
		c := &cases[i]
		count := c.Watchers
		if kind == KindTopics {
			count = c.Topics
		}
		if c.Kind == kind && c.Label == label && count == n && c.Producers == producers {
			return c
		}
	}
	return nil
}

// sizes returns the distinct watcher counts (topic counts, for topics)
// of the cases of kind with the given producers, ascending.
func sizes(cases []Case, kind string, producers int) []int {
	var ns []int
	for _, c := range cases {
		n := c.Watchers
		if kind == KindTopics {
			n = c.Topics
		}
		if c.Kind == kind && c.Producers == producers && !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return ns
}

// mdRate renders delivered/s with three significant digits: "49.2 M/s",
// "557 k/s"; "–" if c or its figure is missing.
func mdRate(c *Case) string {
	if c == nil || c.DeliveredPerSec == nil {
		return "–"
	}
	v, unit := *c.DeliveredPerSec, "/s"
	switch {
	case v >= 1e9:
		v, unit = v/1e9, " G/s"
	case v >= 1e6:
		v, unit = v/1e6, " M/s"
	case v >= 1e3:
		v, unit = v/1e3, " k/s"
	}
	return sig3(v) + unit
}

// sig3 renders v with three significant digits (at least its integer
// part): 1.17, 11.9, 129, 1046.
func sig3(v float64) string {
	switch a := math.Abs(v); {
	case a < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// withRatio renders c's rate followed by the ratio r in parentheses, or
// the rate alone where r is nil, not finite or not positive.
func withRatio(c *Case, r *float64) string {
	s := mdRate(c)
	if c == nil || r == nil || math.IsNaN(*r) || math.IsInf(*r, 0) || *r <= 0 {
		return s
	}
	return fmt.Sprintf("%s (%s×)", s, sig3(*r))
}

// inverse returns 1/r of a system's ratio over fanout's (fanout over the
// system), or nil.
func inverse(c *Case) *float64 {
	if c == nil || c.RatioVsFanout == nil || *c.RatioVsFanout == 0 {
		return nil
	}
	return ptr(1 / *c.RatioVsFanout)
}

// groupN renders a count with thousands separators: 1,000.
func groupN(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func headlineMarkdown(b *strings.Builder, cases []Case) {
	t := mdTable{head: []string{"N watchers", "k8s `watch.Broadcaster`", "fanout `Recv` (pull)", "`limit` (fanout / limit)",
		"fanout `ResultChan`", "raw buffered channels", "teivah/broadcast", "kelindar/event (queue 50,000)",
		"go-disruptor (ring 128)", "fanout at queue 128 (/ go-disruptor)"}}
	for _, n := range sizes(cases, KindThroughput, 1) {
		get := func(label string) *Case { return caseOf(cases, KindThroughput, label, n, 1) }
		pull, dis, q128 := get("fanout wait pull"), get("disruptor q128"), get("fanout wait pull q128")
		var vsLimit, vsDisruptor *float64
		if pull != nil {
			vsLimit = pull.RatioVsLimit
		}
		if dis != nil && q128 != nil && dis.DeliveredPerSec != nil && q128.DeliveredPerSec != nil {
			vsDisruptor = ptr(*q128.DeliveredPerSec / *dis.DeliveredPerSec)
		}
		vsK8s := func(c *Case) string {
			if c == nil {
				return mdRate(c)
			}
			return withRatio(c, c.RatioVsK8s)
		}
		t.rows = append(t.rows, []string{groupN(n), mdRate(get("k8s wait q100")), vsK8s(pull),
			withRatio(get("limit q100"), vsLimit), vsK8s(get("fanout wait chan")), vsK8s(get("chan q100")),
			mdRate(get("teivah q100")), mdRate(get("kelindar q50000")), mdRate(dis), withRatio(q128, vsDisruptor)})
	}
	t.write(b, "Readers that do nothing: one producer, lossless, delivered/s (fanout over k8s; over limit; over go-disruptor)")
}

func workingMarkdown(b *strings.Builder, cases []Case) {
	peers := []string{"kelindar q50000", "disruptor q128", "teivah q100", "cskr q100", "chan q100", "k8s wait q100", "fanout wait pull"}
	t := mdTable{head: []string{"N", "fanout `Recv` (queue 1,024)", "`limit` q1024", "kelindar/event", "go-disruptor",
		"teivah/broadcast", "cskr/pubsub", "raw channels q100", "k8s q100", "fanout at queue 100",
		"CPU ns/value: fanout, kelindar, disruptor"}}
	for _, n := range sizes(cases, KindWorking, 1) {
		get := func(label string) *Case { return caseOf(cases, KindWorking, label, n, 1) }
		pull := get("fanout wait pull q1024")
		row := []string{groupN(n), mdRate(pull), "–"}
		if pull != nil {
			row[2] = withRatio(get("limit q1024"), pull.RatioVsLimit)
		}
		for _, p := range peers {
			row = append(row, withRatio(get(p), inverse(get(p))))
		}
		row = append(row, cpuTriple(pull, get("kelindar q50000"), get("disruptor q128")))
		t.rows = append(t.rows, row)
	}
	t.write(b, "Readers that work: every reader checks its values' order; each system at its defaults (fanout over the system)")
}

// cpuTriple renders the CPU per delivered value of the cases, "–" for one
// not measured.
func cpuTriple(cs ...*Case) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = "–"
		if c != nil && c.CPUNsPerDelivered != nil {
			parts[i] = sig3(*c.CPUNsPerDelivered)
		}
	}
	return strings.Join(parts, ", ")
}

func latencyMarkdown(b *strings.Builder, cases []Case) {
	labels := []string{"fanout wait pull", "fanout wait chan", "k8s wait q100", "chan q100", "teivah q100",
		"kelindar q50000", "disruptor q128", "cskr q100"}
	t := mdTable{head: []string{"at", "fanout `Recv`", "fanout `ResultChan`", "k8s q100", "raw channels", "teivah",
		"kelindar/event", "go-disruptor", "cskr/pubsub"}}
	var rates []int
	for _, c := range cases {
		if c.Kind == KindLatency && c.Producers == 1 && !slices.Contains(rates, c.LatencyRate) {
			rates = append(rates, c.LatencyRate)
		}
	}
	slices.Sort(rates)
	for _, rate := range rates {
		row := []string{groupN(rate) + "/s"}
		for _, l := range labels {
			row = append(row, latencyCell(latencyCase(cases, l, rate)))
		}
		t.rows = append(t.rows, row)
	}
	t.write(b, "Latency: 100 watchers, one producer, p50 / p99 from publish to receipt")
}

func latencyCase(cases []Case, label string, rate int) *Case {
	for i := range cases {
		c := &cases[i]
		if c.Kind == KindLatency && c.Label == label && c.Producers == 1 && c.LatencyRate == rate {
			return c
		}
	}
	return nil
}

// latencyCell renders "p50 / p99 unit", each with its unit where they
// differ, and "[achieved rate]" where the producer fell below 95% of the
// rate asked.
func latencyCell(c *Case) string {
	if c == nil || c.P50LatencyNs == nil {
		return "–"
	}
	p99 := c.P99LatencyNs
	if c.MedianRunP99LatencyNs != nil {
		p99 = c.MedianRunP99LatencyNs
	}
	if p99 == nil {
		return "–"
	}
	a, ua := latencyUnit(*c.P50LatencyNs)
	z, uz := latencyUnit(*p99)
	s := fmt.Sprintf("%s %s / %s %s", a, ua, z, uz)
	if ua == uz {
		s = fmt.Sprintf("%s / %s %s", a, z, uz)
	}
	if c.PublishedPerSec != nil && *c.PublishedPerSec < 0.95*float64(c.LatencyRate) {
		s += fmt.Sprintf(" [%.0fk/s]", *c.PublishedPerSec/1e3)
	}
	return s
}

// latencyUnit renders ns with three significant digits in µs below a
// millisecond, in ms from there on.
func latencyUnit(ns int64) (string, string) {
	if ns < 1e6 {
		return sig3(float64(ns) / 1e3), "µs"
	}
	return sig3(float64(ns) / 1e6), "ms"
}

func topicsMarkdown(b *strings.Builder, cases []Case) {
	t := mdTable{head: []string{"topics, producers", "fanout `Topics`", "by hand", "kelindar/event by type", "cskr/pubsub",
		"watermill (ack)", "watermill (async)"}}
	for _, p := range []int{1, 4} {
		for _, n := range sizes(cases, KindTopics, p) {
			get := func(label string) *Case { return caseOf(cases, KindTopics, label, n, p) }
			topics := get("fanout Topics")
			byHand := mdRate(get("fanout Broadcaster per topic, by hand"))
			if topics != nil {
				byHand = withRatio(get("fanout Broadcaster per topic, by hand"), topics.RatioVsByHand)
			}
			kel, cskr := get("kelindar by type q50000"), get("cskr/pubsub q100")
			t.rows = append(t.rows, []string{groupN(n) + ", " + strconv.Itoa(p), mdRate(topics), byHand,
				withRatio(kel, inverse(kel)), withRatio(cskr, inverse(cskr)),
				mdRate(get("watermill GoChannel ack q100")), asyncCell(get("watermill GoChannel async q100"))})
		}
	}
	t.write(b, "Topics: T topics × 10 watchers, producers round-robin, each reader checking each producer's order (Topics over the system)")
}

// asyncCell renders a case that may reorder: its rate, and "reorders"
// where its readers found values out of order.
func asyncCell(c *Case) string {
	if c == nil || c.OutOfOrder == nil || *c.OutOfOrder == 0 {
		return mdRate(c)
	}
	return mdRate(c) + ", reorders"
}

func targetsMarkdown(b *strings.Builder, ts []Target) {
	met, na := 0, 0
	var missed []Target
	for _, t := range ts {
		switch t.Status {
		case Pass:
			met++
		case NA:
			na++
		default:
			missed = append(missed, t)
		}
	}
	fmt.Fprintf(b, "Targets: %d of %d met (%d N/A).\n", met, len(ts), na)
	for _, t := range missed {
		fmt.Fprintf(b, "- missed: %s: %s, want %s\n", t.Name, t.Measured, t.Want)
	}
}
