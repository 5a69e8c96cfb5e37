package harness

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// A headline run measures the one-producer throughput groups of the
// headline systems only, and its report is the headline table, the
// targets those cases decide, and how to run everything.
func TestHeadlineRunMeasuresTheHeadlineSystemsAndReportsTheirTargets(t *testing.T) {
	cfg := Headline(tinyConfig())
	res, err := Run(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := HeadlineSystems()
	for _, c := range res.Cases {
		if c.Kind != KindThroughput || c.Producers != 1 || !slices.ContainsFunc(want, func(s System) bool { return is(&c, s) }) {
			t.Errorf("a headline run measured %s %s, N=%d, P=%d", c.Kind, c.Label, c.Watchers, c.Producers)
		}
	}
	if got, n := len(res.Cases), len(want)*len(cfg.Watchers); got != n {
		t.Errorf("%d cases, want %d (%d systems × %d watcher counts)", got, n, len(want), len(cfg.Watchers))
	}

	var buf bytes.Buffer
	if err := WriteReport(&buf, res); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, s := range want {
		if !strings.Contains(out, s.Label()) {
			t.Errorf("the headline table lacks %s", s.Label())
		}
	}
	for _, wantText := range []string{"== headline: 1 producer", "== targets measured by the headline ==",
		"fanout wait pull / limit", "make bench-full"} {
		if !strings.Contains(out, wantText) {
			t.Errorf("report lacks %q:\n%s", wantText, out)
		}
	}
	for _, not := range []string{"== throughput:", "N/A", "== stalled watcher"} {
		if strings.Contains(out, not) {
			t.Errorf("a headline report has %q:\n%s", not, out)
		}
	}
}

// The full report starts with the same headline table, so that the
// README's table can be copied from a full run.
func TestFullReportStartsWithTheHeadlineTable(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteReport(&buf, runTiny(t)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	h, tp := strings.Index(out, "== headline: 1 producer"), strings.Index(out, "== throughput:")
	if h < 0 || tp < 0 || h > tp {
		t.Errorf("headline table at %d, first throughput table at %d:\n%s", h, tp, out)
	}
	if !strings.Contains(out, "== targets ==") || strings.Contains(out, "make bench-full") {
		t.Errorf("the full report has the headline's ending:\n%s", out)
	}
}

// The headline table gives each column the ratio its heading names, as the
// README's table does: fanout over k8s, fanout pull over limit in limit's
// column, fanout at kelindar's queue length over kelindar, and the rate
// alone for k8s and the peers.
func TestHeadlineTableGivesEachColumnItsRatio(t *testing.T) {
	at := func(s System, rate float64, vsK8s, vsLimit *float64) Case {
		c := newCase(KindThroughput, s)
		c.Watchers, c.Producers = 100, 1
		c.DeliveredPerSec, c.RatioVsK8s, c.RatioVsLimit = ptr(rate), vsK8s, vsLimit
		return c
	}
	res := &Results{Cases: []Case{
		at(Reference, 10e6, ptr(1.0), nil),
		at(Fanout(StrategyWait, APIPull), 100e6, ptr(10.0), ptr(1.25)),
		at(Limit, 80e6, ptr(8.0), ptr(1.0)),
		at(Teivah, 20e6, ptr(2.0), nil),
		at(Kelindar, 50e6, ptr(5.0), nil),
		at(FanoutAtKelindarQueue, 100e6, ptr(10.0), nil),
		at(Disruptor, 40e6, ptr(4.0), nil),
		at(FanoutAtDisruptorRing, 60e6, ptr(6.0), nil),
	}}
	var b strings.Builder
	if err := reportHeadline(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "100 ") {
			row = l
		}
	}
	for _, want := range []string{"10.0M ", "100.0M (10.0×)", "80.0M (1.25×)", "20.0M ", "50.0M ", "100.0M (2.00×)",
		"limit q100 (fanout pull / limit)", "kelindar q50000", "fanout wait pull q50000 (/ kelindar)",
		"60.0M (1.50×)", "fanout wait pull q128 (/ disruptor)"} {
		if !strings.Contains(out, want) {
			t.Errorf("headline table lacks %q:\n%s", want, out)
		}
	}
	if row == "" || strings.Contains(row, "(8.00×)") || strings.Contains(row, "(5.00×)") || strings.Contains(row, "(4.00×)") ||
		strings.Contains(row, "(6.00×)") || strings.Count(row, "(2.00×)") != 1 {
		t.Errorf("a column shows a ratio its heading does not name:\n%s", out)
	}
	if strings.Contains(out, "fanout wait chan") {
		t.Errorf("a column for a system not measured:\n%s", out)
	}
}
