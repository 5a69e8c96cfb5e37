package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
