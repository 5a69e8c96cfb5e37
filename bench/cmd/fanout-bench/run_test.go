package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fanout-go/fanout/bench/internal/harness"
)

// tiny makes every measurement of a run take a few milliseconds.
var tiny = []string{"-q", "-watchers", "2", "-producers", "1", "-reps", "1", "-events", "100",
	"-latency", "10ms", "-latency-watchers", "2", "-latency-rate", "1000", "-latency-high-rate", "2000", "-scheduler-runs", "2", "-stall-watchers", "2",
	"-idle-watchers", "20", "-idle-pull-watchers", "30", "-idle", "2ms", "-record-events", "300",
	"-latency-producers", "1,2", "-record-producers", "1,8", "-topics", "1,2", "-working-watchers", "2",
	"-nats=false"} // last: the nats tests drop it

func TestRunWritesReportJSONAndSVG(t *testing.T) {
	dir := t.TempDir()
	jsonPath, svgPath := filepath.Join(dir, "bench.json"), filepath.Join(dir, "bench.svg")
	var stdout, stderr bytes.Buffer
	if err := run(append(tiny, "-json", jsonPath, "-svg", svgPath), &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("-q run wrote to stderr: %q", stderr.String())
	}
	for _, want := range []string{"== throughput: 2 watchers, 1 producer ==", "== targets ==", "machine: ",
		"== k8s record: 300 events about 200 pods", "200 Create + 100 Patch", "k8s record vs client-go record",
		"== k8s record: 296 events about 200 pods into a no-op sink, 8 producers", "200 Create + 96 Patch",
		"== publish→receive latency: 2 watchers, 2 producers", "== replay:", "teivah q100", "kelindar q50000", "fanout wait pull q50000", "fanout wait pull q128",
		"fanout wait pull b16", "limit q100", "events long/short", "== topics: 2 topics × 10 watchers", "watermill GoChannel ack q100",
		"== filter: 100 watchers"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}

	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	kinds := map[string]int{}
	for sc.Scan() {
		var c struct {
			Kind      string   `json:"kind"`
			Watchers  int      `json:"watchers"`
			Producers int      `json:"producers"`
			Batch     int      `json:"batch"`
			System    string   `json:"system"`
			RatioCG   *float64 `json:"ratio_vs_client_go"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("JSON line %q: %v", sc.Text(), err)
		}
		kinds[c.Kind]++
		if c.Kind == "record" && (c.RatioCG == nil || (c.Producers != 1 && c.Producers != 8)) {
			t.Errorf("record case %s", sc.Text())
		}
		if c.Kind == "throughput" && c.Batch != 1 && !(c.Batch == 16 && c.System == "fanout") {
			t.Errorf("throughput case %s", sc.Text())
		}
		if c.Kind == "idle_memory" && c.Watchers != 20 && !(c.Watchers == 30 && c.System == "fanout") {
			t.Errorf("idle memory case %s", sc.Text())
		}
	}
	// Latency: light with 1 and 2 producers, high with 1, and the second run of
	// the light rate's fanout wait pull and chan and k8s wait q100.
	if kinds["throughput"] != len(harness.ThroughputSystemsFor(2, 1)) || kinds["stall"] != 14 || kinds["latency"] != 2*len(harness.LatencySystems(1))+len(harness.LatencySystems(2))+2*3 || kinds["idle_memory"] != 8 || kinds["idle_cpu"] != 8 ||
		kinds["replay"] != 3 || kinds["record"] != 4 || kinds["working"] != len(harness.WorkingSystems()) {
		t.Errorf("JSON cases per kind: %v", kinds)
	}

	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(svg, []byte("<?xml")) || !bytes.Contains(svg, []byte("<svg")) {
		t.Errorf("SVG file starts with %.60q", svg)
	}
}

// -json and -svg create their directory, and the report says where each
// file went, so that `make bench` can write into an ignored directory that
// a fresh clone lacks.
func TestRunCreatesOutputDirectoryAndPrintsWhereFilesWent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "nested")
	jsonPath, svgPath := filepath.Join(dir, "bench.json"), filepath.Join(dir, "bench.svg")
	var stdout bytes.Buffer
	if err := run(append(tiny, "-only", "throughput", "-json", jsonPath, "-svg", svgPath), &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	for what, path := range map[string]string{"JSON": jsonPath, "chart": svgPath} {
		if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
			t.Errorf("%s file %s: %v", what, path, err)
		}
		if want := what + " written to " + path + "\n"; !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestRunOnly(t *testing.T) {
	var stdout bytes.Buffer
	if err := run(append(tiny, "-only", "idle_memory"), &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	if !strings.Contains(out, "== idle memory") || strings.Contains(out, "== throughput") || strings.Contains(out, "== idle CPU") ||
		strings.Contains(out, "== k8s record") {
		t.Errorf("-only idle_memory report:\n%s", out)
	}
}

// -only record runs the record comparison alone: its table, and its target
// measured while the others are N/A.
func TestRunOnlyRecord(t *testing.T) {
	var stdout bytes.Buffer
	if err := run(append(tiny, "-only", "record"), &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, want := range []string{"== k8s record: 300 events", "fanout k8s/record", "client-go tools/record", "1.00×",
		"N/A   lossless N=100"} {
		if !strings.Contains(out, want) {
			t.Errorf("-only record report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "== throughput") || strings.Contains(out, "== idle") {
		t.Errorf("-only record measured other kinds:\n%s", out)
	}
	if !strings.Contains(out, "PASS  k8s record vs client-go record") && !strings.Contains(out, "FAIL  k8s record vs client-go record") {
		t.Errorf("record target not evaluated:\n%s", out)
	}
}

// -quick runs the record comparison too.
func TestQuickRunsRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("a -quick run takes some seconds")
	}
	var stdout bytes.Buffer
	if err := run([]string{"-q", "-quick", "-only", "record"}, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); !strings.Contains(out, "== k8s record: 2000 events about 200 pods") || !strings.Contains(out, "200 Create + 1800 Patch") {
		t.Errorf("-quick -only record report:\n%s", out)
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"-watchers", "0"},
		{"-watchers", "10,x"},
		{"-producers", ""},
		{"-reps", "0"},
		{"-only", "throughput,bogus"},
		{"-record-events", "0"},
		{"-record-producers", "0"},
		{"-latency-producers", "x"},
		{"-idle-pull-watchers", "0"},
		{"-nosuchflag"},
		{"extra"},
	} {
		var out bytes.Buffer
		if err := run(append([]string{"-q"}, args...), &out, &out); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}

func TestIntList(t *testing.T) {
	var l intList
	if err := l.Set("1, 10,1000"); err != nil || l.String() != "1,10,1000" {
		t.Errorf("Set: %v, %v", l, err)
	}
	if err := l.Set("-3"); err == nil {
		t.Error("negative count accepted")
	}
	if exitError(3).Error() != "exit status 3" {
		t.Error(exitError(3).Error())
	}
}

// -h lists the flags and exits 0, as a Go command's -h does: it is no
// error, and says nothing more than the usage.
func TestHelpListsTheFlagsAndExitsZero(t *testing.T) {
	var out bytes.Buffer
	if code := exitCode(run([]string{"-h"}, &out, &out), &out); code != 0 {
		t.Errorf("-h: exit status %d, want 0", code)
	}
	if s := out.String(); !strings.Contains(s, "-watchers LIST") || strings.Contains(s, "help requested") {
		t.Errorf("-h printed:\n%s", s)
	}
}

// A bad flag value is reported once (the flag package prints it with the
// usage), with exit status 2, the Go convention for a usage error.
func TestBadFlagIsReportedOnceWithExitStatusTwo(t *testing.T) {
	var out bytes.Buffer
	if code := exitCode(run([]string{"-watchers", "0"}, &out, &out), &out); code != 2 {
		t.Errorf("-watchers 0: exit status %d, want 2", code)
	}
	if n := strings.Count(out.String(), `"0" is not a positive integer`); n != 1 {
		t.Errorf("-watchers 0: the error printed %d times, want once:\n%s", n, out.String())
	}
}

// A run that measured no one-producer throughput case (here -only
// idle_memory, as `make bench BENCHFLAGS=-only=idle_memory` asks, since
// make bench always passes -svg) still completed: exit status 0, the report
// and JSON written, and a note instead of the chart, no empty file.
func TestRunWithNothingToChartCompletesAndSaysSo(t *testing.T) {
	dir := t.TempDir()
	jsonPath, svgPath := filepath.Join(dir, "bench.json"), filepath.Join(dir, "bench.svg")
	var stdout bytes.Buffer
	if err := run(append(tiny, "-only", "idle_memory", "-json", jsonPath, "-svg", svgPath), &stdout, &stdout); err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	if _, err := os.Stat(svgPath); !os.IsNotExist(err) {
		t.Errorf("chart file %s: %v, want none", svgPath, err)
	}
	if fi, err := os.Stat(jsonPath); err != nil || fi.Size() == 0 {
		t.Errorf("JSON file %s: %v", jsonPath, err)
	}
	if !strings.Contains(stdout.String(), "chart not written") {
		t.Errorf("report does not say the chart was not written:\n%s", stdout.String())
	}
}

// -headline (make bench) measures the one-producer throughput of the
// headline systems only, leaves the nats group out, and still writes the
// JSON and the chart; its report ends by saying how to run everything.
func TestHeadlineRunsTheHeadlineAloneAndWritesBothFiles(t *testing.T) {
	dir := t.TempDir()
	jsonPath, svgPath := filepath.Join(dir, "bench.json"), filepath.Join(dir, "bench.svg")
	args := append(slices.Clone(tiny[:len(tiny)-1]), "-headline", "-json", jsonPath, "-svg", svgPath) // without -nats=false
	var stdout bytes.Buffer
	if err := run(args, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, want := range []string{"== headline: 1 producer", "k8s wait q100", "limit q100", "teivah q100", "kelindar q50000",
		"== targets measured by the headline ==", "make bench-full", "JSON written to", "chart written to"} {
		if !strings.Contains(out, want) {
			t.Errorf("-headline report lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"== nats", "== k8s record", "fanout wait pull b16", "== throughput"} {
		if strings.Contains(out, not) {
			t.Errorf("-headline report has %q:\n%s", not, out)
		}
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != len(harness.HeadlineSystems()) {
		t.Errorf("%d JSON lines, want one per headline system:\n%s", n, data)
	}
}

// -cpuprofile writes a profile (gzipped, as go tool pprof reads it); a file that
// cannot be created is an error before anything is measured.
func TestRunWritesACPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	var stdout bytes.Buffer
	if err := run(append(tiny, "-only", "idle_memory", "-cpuprofile", path), &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) { // a profile is gzipped protobuf
		t.Errorf("the profile is not gzipped: % x", b[:min(len(b), 8)])
	}
	bad := filepath.Join(t.TempDir(), "missing", "cpu.pprof")
	if err := run(append(tiny, "-only", "idle_memory", "-cpuprofile", bad), &stdout, &stdout); err == nil {
		t.Error("a profile in a missing directory: no error")
	}
}
