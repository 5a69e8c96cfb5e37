package harness

import (
	"bytes"
	"strings"
	"testing"
)

// readmeCases is one small run: a throughput group at N=100, a working
// group at N=10, one latency case, a topics pair and a rerun.
func readmeCases() []Case {
	pull := thr(Fanout(StrategyWait, APIPull), 100, 148e6)
	pull.RatioVsK8s, pull.RatioVsLimit = ptr(96.6), ptr(1.71)
	dis, q128 := thr(Disruptor, 100, 93e6), thr(fanoutPullAt(DisruptorRing), 100, 190e6)
	work := newCase(KindWorking, Fanout(StrategyWait, APIPull))
	work.Label, work.Queue, work.Watchers, work.Producers = "fanout wait pull q1024", 1024, 10, 1
	work.DeliveredPerSec, work.CPUNsPerDelivered = ptr(251e6), ptr(5.24)
	kel := newCase(KindWorking, Kelindar)
	kel.Watchers, kel.Producers, kel.DeliveredPerSec, kel.RatioVsFanout = 10, 1, ptr(106e6), ptr(0.4219)
	lat := latP(Fanout(StrategyWait, APIPull), 1, 999e3)
	lat.Watchers, lat.LatencyRate, lat.P50LatencyNs, lat.MedianRunP99LatencyNs = 100, 100_000, ptr(int64(615e3)), ptr(int64(1.4e6))
	lat.PublishedPerSec = ptr(19_000.0)
	topics := newCase(KindTopics, System{Name: SystemFanout, Strategy: StrategyWait, API: APITopics, Queue: 1024})
	topics.Label, topics.Topics, topics.Producers, topics.DeliveredPerSec, topics.RatioVsByHand = "fanout Topics", 1000, 4, ptr(248e6), ptr(1.5)
	async := newCase(KindTopics, System{Name: "watermill", API: "async", Queue: 100})
	async.Label, async.Topics, async.Producers, async.DeliveredPerSec, async.OutOfOrder = "watermill GoChannel async q100", 1000, 4, ptr(400e3), ptr(int64(12))
	rerun := thr(Fanout(StrategyWait, APIPull), 100, 1e6)
	rerun.Run = 2
	return []Case{pull, thr(Reference, 100, 1.55e6), dis, q128, work, kel, lat, topics, async, rerun}
}

func TestReadmeTablesShowTheRunsFiguresInMarkdown(t *testing.T) {
	var js, md bytes.Buffer
	if err := WriteJSON(&js, &Results{Cases: readmeCases()[:9], Reruns: readmeCases()[9:]}); err != nil {
		t.Fatal(err)
	}
	cases, err := ReadCases(&js)
	if err != nil || len(cases) != 10 {
		t.Fatalf("ReadCases: %d cases, %v; want 10", len(cases), err)
	}
	if err := WriteReadmeTables(&md, cases); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, want := range []string{
		"| 100 | 1.55 M/s | 148 M/s (96.6×) | – | – | – | – | – | 93.0 M/s | 190 M/s (2.04×) |",
		"| 10 | 251 M/s | – | 106 M/s (2.37×) |",
		"| 5.24, –, – |",
		"| 100,000/s | 615 µs / 1.40 ms [19k/s] |",
		"| 1,000, 4 | 248 M/s | – | – | – | – | 400 k/s, reorders |",
		"|---|---:|",
		"Targets: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "1.00 M/s") {
		t.Errorf("a rerun's figure (run 2) reached the tables:\n%s", out)
	}
}

func TestReadmeTablesLeaveOutGroupsTheRunDidNotMeasure(t *testing.T) {
	var md bytes.Buffer
	if err := WriteReadmeTables(&md, readmeCases()[6:7]); err != nil {
		t.Fatal(err)
	}
	if out := md.String(); strings.Contains(out, "Readers that") || strings.Contains(out, "Topics:") || !strings.Contains(out, "Latency:") {
		t.Errorf("a run of latency alone gives tables:\n%s", out)
	}
}

func TestReadCasesNamesTheLineItCannotRead(t *testing.T) {
	_, err := ReadCases(strings.NewReader("{\"kind\":\"throughput\"}\n{\"kind\": 3}\n"))
	if err == nil || !strings.Contains(err.Error(), "case 2") {
		t.Errorf("ReadCases of a bad second line: %v, want an error naming case 2", err)
	}
}

func TestSig3KeepsThreeSignificantDigits(t *testing.T) {
	for v, want := range map[float64]string{1.174: "1.17", 11.94: "11.9", 129.4: "129", 1046: "1046", 0.866: "0.87"} {
		if got := sig3(v); got != want {
			t.Errorf("sig3(%v) = %s, want %s", v, got, want)
		}
	}
	if got := groupN(1_000_000); got != "1,000,000" {
		t.Errorf("groupN(1e6) = %s", got)
	}
}

// A full run's JSON holds the nats group's lines too: they are read as
// cases of their kind, which no table shows.
func TestReadCasesKeepsTheNATSGroupsLinesOutOfTheTables(t *testing.T) {
	const natsLine = "{\"kind\":\"nats\",\"label\":\"fanout+nats N=10\",\"system\":\"fanout+nats\",\"api\":\"Subscriber → Broadcaster, Recv\",\"queue\":100,\"watchers\":30,\"subscribers\":3,\"watchers_per_subscriber\":10,\"producers\":1,\"reps\":5,\"published\":32808,\"delivered_per_sec\":7556451.875484346,\"published_per_sec\":251881.72918281157,\"spread_pct\":20.584675627726806,\"ratio_vs_nats\":8.381230336743975,\"ratio_vs_raw\":null,\"frame\":0,\"p50_latency_ns\":null,\"p99_latency_ns\":null,\"median_run_p99_latency_ns\":null,\"latency_samples\":null,\"acks\":null,\"network_msgs\":131232,\"network_msgs_per_value\":4,\"lost\":0,\"strategy\":\"\",\"stalled_watchers\":0,\"short_published\":0,\"batch\":0,\"topics\":0,\"history\":0,\"replay\":0,\"run\":0,\"ratio_vs_k8s_wait_q100\":null,\"ratio_vs_limit\":null,\"ratio_vs_fanout\":null,\"ratio_vs_by_hand\":null,\"ratio_vs_client_go\":null,\"ns_per_publish\":null,\"producer_ns_per_publish\":null,\"stall_ratio\":null,\"allocs_per_event\":null,\"drop_pct\":null,\"ns_per_replayed_value\":null,\"p999_latency_ns\":null,\"latency_rate\":0,\"cpu_ns_per_delivered\":null,\"out_of_order\":null,\"idle_bytes_per_watcher\":null,\"idle_cpu_ms_per_sec\":null,\"peak_goroutines\":null}\n"
	cases, err := ReadCases(strings.NewReader(natsLine))
	if err != nil || len(cases) != 1 || cases[0].Kind != "nats" {
		t.Fatalf("ReadCases of a nats line: %v, %v", cases, err)
	}
	var md bytes.Buffer
	if err := WriteReadmeTables(&md, cases); err != nil || strings.Contains(md.String(), "|") {
		t.Errorf("a nats case reached a table (%v):\n%s", err, md.String())
	}
}
