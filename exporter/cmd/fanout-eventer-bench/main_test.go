package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// OpenCensus, which Google's Pub/Sub client (a sink of the exporter)
	// links, starts its stats worker in an init function, for the life of
	// the process.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

func TestBenchReportsThroughputAndBurstMemory(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, 30_000, 30_000); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"throughput: 30000 occurrences", "occurrences/s", "resident memory: peak", "stalled webhook:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
