package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fanout-go/fanout/k8s/record"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The targets judge fanout's default against its one writer and
// client-go, per API, and say when a system they need was not measured.
func TestTargetsJudgeTheDefaultAgainstOneWriterAndClientGo(t *testing.T) {
	rs := []result{
		{API: "core/v1", System: "client-go", Wall: 6 * time.Second},
		{API: "core/v1", System: "fanout", Writers: 1, Wall: 6 * time.Second, PerSec: 160},
		{API: "core/v1", System: "fanout", Writers: record.DefaultWriters, Wall: time.Second, After: 900 * time.Millisecond, PerSec: 1000},
		{API: "events.k8s.io/v1", System: "fanout", Writers: record.DefaultWriters, Wall: 3 * time.Second, After: 3 * time.Second, PerSec: 300, Lost: 2},
	}
	got := strings.Join(targets(rs), "\n")
	for _, want := range []string{
		"PASS  core/v1: default on the server within 2 s",
		"PASS  core/v1: default ≥ 4× the writes/s of one writer: 6.2×",
		"PASS  core/v1: default loses nothing",
		"PASS  core/v1: default ahead of client-go",
		"events.k8s.io/v1: not measured",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack %q:\n%s", want, got)
		}
	}
	rs[2].After, rs[2].Lost = 3*time.Second, 1
	got = strings.Join(targets(rs), "\n")
	for _, want := range []string{"FAIL  core/v1: default on the server within 2 s", "FAIL  core/v1: default loses nothing",
		"FAIL  core/v1: default ahead of client-go"} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack %q:\n%s", want, got)
		}
	}
}

// Bad flags are refused.
func TestParseRefusesABurstThatObjectsDoNotDivide(t *testing.T) {
	for _, args := range [][]string{{"-events", "1001"}, {"-reps", "0"}, {"-writers", "1,x"}, {"-writers", "0"}} {
		if _, err := parse(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	o, err := parse(nil)
	if err != nil || o.events != 1000 || len(o.writers) != 4 {
		t.Errorf("defaults %+v, %v", o, err)
	}
}

// The results file may be in a directory that does not exist yet (make
// bench-e2e writes to bench/out on a fresh clone).
func TestWriteJSONMakesTheFilesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out", "e2e.json")
	if err := writeJSON(path, []result{{API: "core/v1", System: "fanout", Writers: 8}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), `"writers":8`) {
		t.Errorf("file %q, %v", b, err)
	}
}
