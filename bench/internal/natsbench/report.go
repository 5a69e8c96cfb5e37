package natsbench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fanout-go/fanout/bench/internal/harness"
)

// WriteReport prints the group's tables.
func WriteReport(w io.Writer, res *Results) error {
	if len(res.Cases) == 0 {
		return nil // the group did not run
	}
	var b strings.Builder
	cfg := res.Config
	fmt.Fprintf(&b, "\n== nats: 1 producer → embedded NATS server → %d subscriber connections × N watchers (%.1fs) ==\n",
		cfg.Subscribers, res.Elapsed.Seconds())
	fmt.Fprintf(&b, "fanout+nats: one fanoutnats.Subscriber per connection into a broadcaster (queue %d, wait) read with Recv;\n", localQueue)
	fmt.Fprintf(&b, "fanout+nats framed: the same, the producer's values sent by a fanoutnats.Forwarder in frames of up to %d;\n", cfg.Frame)
	b.WriteString("nats: one NATS subscription per watcher, each decoding; nats-raw: one subscription, no decoding (the ceiling).\n")
	fmt.Fprintf(&b, "JSON payload; producer at most %d values ahead; medians of %d repetitions, systems interleaved; net msgs = server in+out;\n", cfg.Window, cfg.Reps)
	b.WriteString("published/s is also the values/s each subscription received.\n")
	if err := writeThroughput(&b, res.Cases); err != nil {
		return err
	}
	if err := writeLatency(&b, res.Cases, cfg); err != nil {
		return err
	}
	writeJetStream(&b, res.Cases)
	for _, t := range res.Targets {
		fmt.Fprintf(&b, "target: %s %s: %s %s\n", t.Name, t.Want, t.Measured, t.Status)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeThroughput(b *strings.Builder, cases []Case) error {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tN\twatchers\tdelivered/s\tpublished/s\tvs nats\tvs raw msgs/s\tnet msgs/value\tspread\tlost\t")
	for _, c := range cases {
		if c.Kind != Kind {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%.2f\t%.0f%%\t%d\t\n", c.System, c.WatchersPerSubscriber, c.Watchers,
			harness.FormatRate(c.DeliveredPerSec), harness.FormatRate(c.PublishedPerSec), harness.FormatRatio(c.RatioVsNATS),
			harness.FormatRatio(c.RatioVsRaw), c.NetworkMsgsPerValue, c.SpreadPct, c.Lost)
	}
	return tw.Flush()
}

func writeLatency(b *strings.Builder, cases []Case, cfg Config) error {
	if cfg.LatencyRate == 0 {
		return nil
	}
	fmt.Fprintf(b, "latency: a Forwarder at %d values/s → %d connections × %d watchers, %d runs of %v per system:\n",
		cfg.LatencyRate, cfg.Subscribers, cfg.LatencyWatchers, cfg.Reps, cfg.LatencyDuration)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tp50\tp99\tmedian run p99\tsamples\tlost\t")
	for _, c := range cases {
		if c.Kind != KindLatency {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t\n", c.System, ns(c.P50LatencyNs), ns(c.P99LatencyNs),
			ns(c.MedianRunP99LatencyNs), *c.LatencySamples, c.Lost)
	}
	return tw.Flush()
}

func writeJetStream(b *strings.Builder, cases []Case) {
	for _, c := range cases {
		if c.Kind == KindJetStream {
			fmt.Fprintf(b, "%s: %d values from a stream into %d lossless watchers: %s values/s (%s delivered/s), spread %.0f%%, %d acks per run\n",
				c.System, c.Published, c.Watchers, harness.FormatRate(c.PublishedPerSec), harness.FormatRate(c.DeliveredPerSec),
				c.SpreadPct, *c.Acks)
		}
	}
}

func ns(v *int64) string {
	if v == nil {
		return "-"
	}
	return time.Duration(*v).Round(time.Microsecond).String()
}

// WriteJSON writes one JSON object per case (JSON Lines), kinds "nats",
// "nats_latency" and "nats_jetstream". The lines go into the same file as
// the harness's cases, every line of which has every field: each line
// carries the harness's fields too ([harness.Case]), null or zero where the
// nats group does not measure them, and its own after them.
func WriteJSON(w io.Writer, res *Results) error {
	enc := json.NewEncoder(w)
	for _, c := range res.Cases {
		if err := enc.Encode(jsonLine{Case: c}); err != nil {
			return err
		}
	}
	return nil
}

// jsonLine is one JSON line of a nats case: its own fields, and under them
// those of a harness case. encoding/json takes a field name from the
// shallowest embedded struct that has it, so a name both have (kind,
// system, watchers, delivered_per_sec, p99_latency_ns, ...) comes from the
// nats case, and the rest of the harness's fields are there, null.
type jsonLine struct {
	Case
	harnessFields
}

// harnessFields puts the fields of a harness case one level deeper than
// those of [Case] in a [jsonLine].
type harnessFields struct{ harness.Case }
