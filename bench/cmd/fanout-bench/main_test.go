package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// -json and -svg create their directory, and the command says where each
// file went, so that `make bench` can write into an ignored directory that
// a fresh clone lacks.
func TestOutputFilesGoIntoNewDirectoryAndArePrinted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "nested")
	jsonFile, svgFile := filepath.Join(dir, "bench.json"), filepath.Join(dir, "bench.svg")
	var stdout bytes.Buffer
	err := run([]string{"-quick", "-only", "throughput", "-watchers", "1", "-reps", "1", "-events", "200", "-q",
		"-json", jsonFile, "-svg", svgFile}, &stdout, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for what, file := range map[string]string{"JSON": jsonFile, "chart": svgFile} {
		if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
			t.Errorf("%s file %s: %v", what, file, err)
		}
		if want := what + " written to " + file + "\n"; !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
}
