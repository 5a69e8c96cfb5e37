package proctest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProcessWritesItsOutputToTheLogAndReportsItsExit(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "out.log")
	p, err := Start("/bin/sh", []string{"-c", "echo one; echo two >&2; exit 3"}, dir, log)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	b, _ := os.ReadFile(log)
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "exit status 3") || Tail(b, 1) != "two" {
		t.Errorf("exit %v, output %q", err, b)
	}
}

func TestKillEndsAProcessThatRunsOn(t *testing.T) {
	dir := t.TempDir()
	p, err := Start("/bin/sh", []string{"-c", "sleep 600"}, dir, filepath.Join(dir, "out.log"))
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("exit %v, want killed", err)
	}
}
