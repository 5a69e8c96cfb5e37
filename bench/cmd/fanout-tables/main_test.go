package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const oneCase = `{"kind":"throughput","label":"fanout wait pull","system":"fanout","strategy":"wait","api":"pull","queue":100,"watchers":10,"producers":1,"run":1,"delivered_per_sec":131000000}` + "\n"

func TestPrintsTheTablesOfTheFileGiven(t *testing.T) {
	name := filepath.Join(t.TempDir(), "bench.json")
	if err := os.WriteFile(name, []byte(oneCase), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{name}, nil, &out, &errOut); code != 0 || !strings.Contains(out.String(), "| 10 | – | 131 M/s |") {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s", code, out.String(), errOut.String())
	}
}

func TestReadsStandardInputForADash(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-"}, strings.NewReader(oneCase), &out, &errOut); code != 0 || !strings.Contains(out.String(), "131 M/s") {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s", code, out.String(), errOut.String())
	}
}

func TestFailsClearlyOnAMissingOrEmptyFileAndBadArguments(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.json")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{filepath.Join(t.TempDir(), "none.json")}, 1, "no such file"},
		{[]string{empty}, 1, "holds no case"},
		{[]string{"a", "b"}, 2, "usage"},
		{[]string{"-h"}, 0, "usage"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, nil, &out, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.say) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut.String(), tc.code, tc.say)
		}
	}
}
