package natsbench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/fanout-go/fanout/bench/internal/harness"
)

// WriteReport prints the group's table.
func WriteReport(w io.Writer, res *Results) error {
	if len(res.Cases) == 0 {
		return nil // the group did not run
	}
	var b strings.Builder
	cfg := res.Config
	fmt.Fprintf(&b, "\n== nats: 1 producer → embedded NATS server → %d subscriber connections × N watchers (%.1fs) ==\n",
		cfg.Subscribers, res.Elapsed.Seconds())
	fmt.Fprintf(&b, "fanout+nats: one fanoutnats.Subscriber per connection into a broadcaster (queue %d, wait) read with Recv;\n", localQueue)
	b.WriteString("nats: one NATS subscription per watcher, each decoding; nats-raw: one subscription, no decoding (the ceiling).\n")
	fmt.Fprintf(&b, "JSON payload; producer at most %d values ahead; medians of %d repetitions, systems interleaved; net msgs = server in+out\n", cfg.Window, cfg.Reps)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tN\twatchers\tdelivered/s\tpublished/s\tvs nats\tnet msgs/value\tspread\tlost\t")
	for _, c := range res.Cases {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%.0f\t%.0f%%\t%d\t\n", c.System, c.WatchersPerSubscriber, c.Watchers,
			harness.FormatRate(c.DeliveredPerSec), harness.FormatRate(c.PublishedPerSec), harness.FormatRatio(c.RatioVsNATS),
			c.NetworkMsgsPerValue, c.SpreadPct, c.Lost)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range res.Targets {
		fmt.Fprintf(&b, "target: %s %s: %s %s\n", t.Name, t.Want, t.Measured, t.Status)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes one JSON object per case (JSON Lines), kind "nats".
func WriteJSON(w io.Writer, res *Results) error {
	enc := json.NewEncoder(w)
	for _, c := range res.Cases {
		if err := enc.Encode(c); err != nil {
			return err
		}
	}
	return nil
}
