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
		MinValues: 100, MaxValues: 200, Window: 64}
}

func TestRunDeliversEveryValueAndReportsEverySystem(t *testing.T) {
	res, err := Run(tiny(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cases) != 6 {
		t.Fatalf("%d cases, want 3 systems × 2 groups", len(res.Cases))
	}
	for _, c := range res.Cases {
		if c.Lost != 0 || c.DeliveredPerSec <= 0 || c.Kind != Kind {
			t.Errorf("case %+v", c)
		}
		want := float64(1 + c.Watchers) // one message in, one out per subscription
		if c.System == SystemFanout {
			want = float64(1 + c.Subscribers)
		}
		if c.NetworkMsgsPerValue != want {
			t.Errorf("%s: %.1f network messages per value, want %.0f", c.Label, c.NetworkMsgsPerValue, want)
		}
		if (c.System == SystemFanout) != (c.RatioVsNATS != nil) {
			t.Errorf("%s: ratio %v", c.Label, c.RatioVsNATS)
		}
	}
	if len(res.Targets) != 1 || res.Targets[0].Status == harness.NA {
		t.Errorf("targets %+v", res.Targets)
	}
	var out bytes.Buffer
	if err := WriteReport(&out, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "== nats: 1 producer") || !strings.Contains(out.String(), SystemRaw) {
		t.Errorf("report:\n%s", out.String())
	}
	out.Reset()
	if err := WriteJSON(&out, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d JSON lines", len(lines))
	}
	var c struct {
		Kind, System string
	}
	if err := json.Unmarshal([]byte(lines[0]), &c); err != nil || c.Kind != "nats" || c.System != SystemFanout {
		t.Errorf("JSON line %s: %v", lines[0], err)
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
