package natsbench

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/fanout-go/fanout/bench/internal/harness"
)

// The nats lines go into the same JSON Lines file as the harness's cases
// (`make bench-full` writes both to bench/out/bench.json), whose documented
// contract is that every line has every field, null where the kind does
// not measure it: a reader of the file must find strategy, ns_per_publish,
// allocs_per_event, drop_pct, idle_bytes_per_watcher and the rest on the
// nats lines too, besides their own fields.
func TestWriteJSONLinesHaveEveryFieldOfTheHarnessCases(t *testing.T) {
	var hbuf bytes.Buffer
	if err := harness.WriteJSON(&hbuf, &harness.Results{Cases: []harness.Case{{Kind: harness.KindThroughput}}}); err != nil {
		t.Fatal(err)
	}
	var hline map[string]json.RawMessage
	if err := json.Unmarshal(hbuf.Bytes(), &hline); err != nil {
		t.Fatal(err)
	}
	ratio, p99 := 52.6, int64(40_000)
	res := &Results{Cases: []Case{
		{Kind: Kind, Label: "fanout+nats N=100", System: SystemFanout, API: "pull", Queue: 100, Watchers: 300,
			Subscribers: 3, WatchersPerSubscriber: 100, Producers: 1, Reps: 5, Published: 1000, DeliveredPerSec: 3e7,
			RatioVsNATS: &ratio, NetworkMsgs: 4000, NetworkMsgsPerValue: 4},
		{Kind: KindLatency, Label: "fanout+nats forward", System: SystemFanout, P99LatencyNs: &p99},
	}}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(res.Cases) {
		t.Fatalf("%d lines for %d cases:\n%s", len(lines), len(res.Cases), buf.String())
	}
	for i, l := range lines {
		var got map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		var missing []string
		for k := range hline {
			if _, ok := got[k]; !ok {
				missing = append(missing, k)
			}
		}
		slices.Sort(missing)
		if len(missing) > 0 {
			t.Errorf("line %d lacks the harness fields %v:\n%s", i, missing, l)
		}
		for _, k := range []string{"allocs_per_event", "drop_pct", "idle_bytes_per_watcher", "ns_per_publish"} {
			if v, ok := got[k]; ok && string(v) != "null" {
				t.Errorf("line %d: %s = %s, want null (not measured)", i, k, v)
			}
		}
	}
	var first struct {
		Kind        string   `json:"kind"`
		System      string   `json:"system"`
		Watchers    int      `json:"watchers"`
		Subscribers int      `json:"subscribers"`
		Delivered   float64  `json:"delivered_per_sec"`
		RatioVsNATS *float64 `json:"ratio_vs_nats"`
		P99         *int64   `json:"p99_latency_ns"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Kind != Kind || first.System != SystemFanout || first.Watchers != 300 || first.Subscribers != 3 ||
		first.Delivered != 3e7 || first.RatioVsNATS == nil || *first.RatioVsNATS != ratio || first.P99 != nil {
		t.Errorf("the nats fields did not survive: %+v", first)
	}
	var second struct {
		P99 *int64 `json:"p99_latency_ns"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil || second.P99 == nil || *second.P99 != p99 {
		t.Errorf("latency line %s: p99 %v, %v", lines[1], second.P99, err)
	}
}
