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
