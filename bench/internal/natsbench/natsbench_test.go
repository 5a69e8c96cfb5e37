package natsbench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fanout-go/fanout/bench/internal/harness"
)

// tiny makes every measurement take a few milliseconds.
func tiny() Config {
	return Config{Watchers: []int{2, 100}, Subscribers: 3, Reps: 1, Target: time.Millisecond,
		MinValues: 100, MaxValues: 200, Window: 64, Frame: 16,
		LatencyRate: 2000, LatencyWatchers: 4, LatencyDuration: 50 * time.Millisecond,
		JetStreamValues: 300, JetStreamWatchers: 5}
}

func TestRunDeliversEveryValueAndReportsEverySystem(t *testing.T) {
	res, err := Run(tiny(), nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, c := range res.Cases {
		kinds[c.Kind]++
		if c.Lost != 0 || c.PublishedPerSec <= 0 {
			t.Errorf("case %+v", c)
		}
		if c.Kind == Kind {
			checkThroughputCase(t, c)
		}
	}
	if kinds[Kind] != 8 || kinds[KindLatency] != 2 || kinds[KindJetStream] != 1 {
		t.Fatalf("cases by kind %v, want 4 systems × 2 groups, 2 latency cases, 1 JetStream case", kinds)
	}
	if len(res.Targets) != 3 {
		t.Fatalf("targets %+v", res.Targets)
	}
	for _, tg := range res.Targets {
		if tg.Status == harness.NA {
			t.Errorf("target %+v not measured", tg)
		}
	}
	var out bytes.Buffer
	if err := WriteReport(&out, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "== nats: 1 producer") || !strings.Contains(out.String(), SystemRaw) ||
		!strings.Contains(out.String(), "latency: a Forwarder") || !strings.Contains(out.String(), SystemJetStream+":") {
		t.Errorf("report:\n%s", out.String())
	}
	out.Reset()
	if err := WriteJSON(&out, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 11 {
		t.Fatalf("%d JSON lines", len(lines))
	}
	var c struct {
		Kind, System string
	}
	if err := json.Unmarshal([]byte(lines[0]), &c); err != nil || c.Kind != "nats" || c.System != SystemFanout {
		t.Errorf("JSON line %s: %v", lines[0], err)
	}
}

// checkThroughputCase checks a throughput case's messages per value and
// ratios.
func checkThroughputCase(t *testing.T, c Case) {
	t.Helper()
	want := float64(1 + c.Watchers) // one message in, one out per subscription
	switch c.System {
	case SystemFanout:
		want = float64(1 + c.Subscribers)
	case SystemFramed: // frames of up to 16 values
		if c.NetworkMsgsPerValue >= float64(1+c.Subscribers) || c.RatioVsRaw == nil || c.Frame != 16 {
			t.Errorf("%s: %.2f network messages per value, ratio vs raw %v: want frames", c.Label, c.NetworkMsgsPerValue, c.RatioVsRaw)
		}
		want = c.NetworkMsgsPerValue
	}
	if c.NetworkMsgsPerValue != want || c.DeliveredPerSec <= 0 {
		t.Errorf("%s: %.1f network messages per value, want %.0f", c.Label, c.NetworkMsgsPerValue, want)
	}
	if (c.System == SystemFanout || c.System == SystemFramed) != (c.RatioVsNATS != nil) {
		t.Errorf("%s: ratio %v", c.Label, c.RatioVsNATS)
	}
}

func TestValidateRejectsAnEmptyConfig(t *testing.T) {
	if err := (Config{}).Validate(); err == nil {
		t.Fatal("the zero Config validated")
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := QuickConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}
