package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// -only with -nats runs the nats group: its table and target, and its JSON
// lines of kind nats after the others.
func TestRunNATSGroup(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	var stdout bytes.Buffer
	args := append(tiny, "-only", "idle_memory", "-nats", "-quick", "-json", jsonPath)
	if err := run(args, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, want := range []string{"== nats: 1 producer", "fanout+nats", "nats-raw", "target: nats: fanout+nats vs one NATS subscription per watcher"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), `"kind":"nats"`); n != 8 {
		t.Errorf("%d JSON lines of kind nats, want 8:\n%s", n, data)
	}
}

func TestOnlyLeavesTheNATSGroupOut(t *testing.T) {
	var stdout bytes.Buffer
	args := append(slices.Clone(tiny[:len(tiny)-1]), "-only", "idle_memory") // without -nats=false
	if err := run(args, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stdout.String(), "== nats") {
		t.Errorf("-only idle_memory ran the nats group:\n%s", stdout.String())
	}
}
