package exporter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"
)

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("line %q is not JSON", sc.Text())
		}
		keys = append(keys, lineKey(sc.Bytes()))
	}
	return keys
}

func writeSeq(t *testing.T, s *FileSink, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		o := occ("u"+strings.Repeat("x", i%3), int32(i), "ns")
		o.Seq = uint64(i)
		if n, err := s.Write(context.Background(), []*Occurrence{o}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	}
}

func TestFileSinkRotatesBySizeAndKeepsMaxBackups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ev.jsonl")
	s, err := NewFileSink(FileConfig{Path: path, MaxBytes: 1000, MaxBackups: 2})
	if err != nil {
		t.Fatal(err)
	}
	writeSeq(t, s, 1, 60)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	gens, _ := backups(path)
	if len(gens) != 2 {
		t.Fatalf("rotated files %v, want the 2 newest", gens)
	}
	for _, g := range gens {
		if fi, err := os.Stat(path + "." + itoa(g)); err != nil || fi.Size() > 1000 {
			t.Errorf("rotated file %d: %v, size over 1000", g, err)
		}
	}
	if keys := readLines(t, path); len(keys) == 0 || keys[len(keys)-1] != "uxx/59" {
		t.Errorf("current file ends with %v, want uxx/59 last", keys)
	}
}

// Without maxbackups, as in kubernetes-event-exporter's examples, every
// rotated file is kept, as their lumberjack keeps them.
func TestFileSinkWithoutMaxbackupsKeepsEveryRotatedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ev.jsonl")
	s, err := NewFileSink(FileConfig{Path: path, MaxBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	writeSeq(t, s, 1, 60)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if gens, _ := backups(path); len(gens) < 6 || gens[0] != 1 {
		t.Errorf("rotated files %v remain, want every one from 1", gens)
	}
}

// storedAfterRestart opens a file sink with cfg, as a restart does, and
// returns what it reports stored after mark.
func storedAfterRestart(t *testing.T, cfg FileConfig, mark string) map[string]struct{} {
	t.Helper()
	s, err := NewFileSink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	stored, err := s.Stored(mark)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

func TestFileSinkReportsWhatItStoredAfterAMarkAcrossRotationAndACrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ev.jsonl")
	s, err := NewFileSink(FileConfig{Path: path, MaxBytes: 600, MaxBackups: 100})
	if err != nil {
		t.Fatal(err)
	}
	writeSeq(t, s, 1, 10)
	mark := s.Mark(5) // the checkpoint covers Seq 1..5
	writeSeq(t, s, 10, 30)
	_ = s.Close(context.Background())
	// A crash in the middle of a line.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString(`{"uid":"torn","cou`)
	f.Close()

	stored := storedAfterRestart(t, FileConfig{Path: path, MaxBytes: 600, MaxBackups: 100}, mark)
	for i := 6; i < 30; i++ {
		k := Key("u"+strings.Repeat("x", i%3), int32(i))
		if _, ok := stored[k]; !ok {
			t.Errorf("%s stored after the mark is not reported", k)
		}
	}
	for i := 1; i <= 5; i++ {
		if _, ok := stored[Key("u"+strings.Repeat("x", i%3), int32(i))]; ok {
			t.Errorf("Seq %d, covered by the mark, is reported", i)
		}
	}
	if keys := readLines(t, path); len(keys) > 0 && strings.HasPrefix(keys[len(keys)-1], "torn") {
		t.Error("the torn last line was kept")
	}
}

func TestFileSinkRejectsABadMark(t *testing.T) {
	s, err := NewFileSink(FileConfig{Path: filepath.Join(t.TempDir(), "f")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, m := range []string{"", "x:1", "1:-5", "0:0", "1"} {
		if _, err := s.Stored(m); err == nil {
			t.Errorf("Stored(%q) returned no error", m)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestFileSinkOnAPipeLikeDevStdoutWritesEveryLine(t *testing.T) {
	// /proc/self/fd/N is what /dev/stdout resolves to; N is a pipe here,
	// as a container runtime connects stdout.
	r, w, path := testPipe(t)
	s, err := NewFileSink(FileConfig{Path: path})
	if err != nil {
		t.Fatalf("opening a pipe: %v", err)
	}
	writeSeq(t, s, 1, 4)
	if m := s.Mark(3); m != "" {
		t.Errorf("mark %q on a pipe, want none: it cannot be read back", m)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 3 || !json.Valid([]byte(lines[2])) {
		t.Errorf("the pipe got %q, want 3 JSON lines", b)
	}
}

func TestFileSinkOnDevStdoutRedirectedToAFileAppendsWithoutTruncating(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	const before = "a line of another program\nno newline yet"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := NewFileSink(FileConfig{Path: fmt.Sprintf("/proc/self/fd/%d", f.Fd()), MaxBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	writeSeq(t, s, 1, 3)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), before) || strings.Count(string(b), "\n") != 3 {
		t.Errorf("file holds %q: want what was there, then 2 lines, nothing rotated", b)
	}
	if names, _ := filepath.Glob(path + ".*"); len(names) > 0 {
		t.Errorf("rotated into %v", names)
	}
}

func TestSinksWritingOnePipeNeverInterleaveTheirLines(t *testing.T) {
	r, w, path := testPipe(t)
	// Two receivers writing /dev/stdout, as a file and as a pipe: two
	// descriptors of one pipe, written by two goroutines, in batches larger
	// than what the kernel writes to a pipe at once.
	file, err := NewFileSink(FileConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := newPipeSink(&PipeConfig{Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]*Occurrence, 200)
	for i := range batch {
		batch[i] = occ(fmt.Sprintf("uid-%d", i), 1, "ns")
		batch[i].Message = strings.Repeat("m", 400)
	}
	const rounds = 20
	var g errgroup.Group
	for _, s := range []Sink{file, pipe} {
		g.Go(func() error {
			for range rounds {
				if _, err := s.Write(context.Background(), batch); err != nil {
					return err
				}
			}
			return nil
		})
	}
	read := make(chan []string, 1)
	go func() { read <- pipeLines(r) }()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Sink{file, pipe} {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	lines := <-read
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("a torn line on the pipe (%d bytes): %.120q...", len(l), l)
		}
	}
	if len(lines) != 2*rounds*len(batch) {
		t.Errorf("%d lines on the pipe, want %d", len(lines), 2*rounds*len(batch))
	}
}

// pipeLines returns the lines read from r until its end.
func pipeLines(r io.Reader) []string {
	var lines []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func TestSinksAppendEveryLineToStdoutRedirectedToAFile(t *testing.T) {
	// A shell's "> events.log": a regular file, opened without O_APPEND,
	// as the standard output; a stdout, a pipe and a file receiver all
	// write it.
	path := filepath.Join(t.TempDir(), "events.log")
	stdout, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	dev := fmt.Sprintf("/proc/self/fd/%d", stdout.Fd())
	file, err := NewFileSink(FileConfig{Path: dev})
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := newPipeSink(&PipeConfig{Path: dev}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sinks := []Sink{stdoutSinkOn(stdout, nil), file, pipe}
	const rounds = 3
	for r := range rounds {
		for i, s := range sinks {
			if _, err := s.Write(context.Background(), []*Occurrence{occ(fmt.Sprintf("uid-%d-%d", r, i), 1, "ns")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range sinks {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("a line overwritten by another receiver: %.120q", l)
		}
	}
	if len(lines) != rounds*len(sinks) {
		t.Errorf("%d lines in the file, want %d: a receiver wrote over another's", len(lines), rounds*len(sinks))
	}
}

func TestStreamLockIsOnePerStream(t *testing.T) {
	_, w1, path1 := testPipe(t)
	_, w2, _ := testPipe(t)
	again, err := os.OpenFile(path1, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	regular, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()
	switch {
	case streamLock(w1) == nil || streamLock(w1) != streamLock(again):
		t.Error("two descriptors of one pipe have different locks: their lines could interleave")
	case streamLock(w1) == streamLock(w2):
		t.Error("two pipes share a lock: a stalled one would hold back the other")
	case streamLock(regular) != nil || streamLock(&bytes.Buffer{}) != nil:
		t.Error("a regular file or a writer that is not a file has a stream lock")
	}
}

func TestFileSinkMarkOnAStreamWaitsForNoWrite(t *testing.T) {
	_, _, path := testPipe(t)
	s, err := NewFileSink(FileConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	// A write to a stalled pipe holds s.mu; the checkpoint asks every
	// sink for its mark, and must not wait for it.
	s.mu.Lock()
	m := s.Mark(1)
	s.mu.Unlock()
	if m != "" {
		t.Errorf("mark %q on a stream, want none", m)
	}
}

// testPipe returns a pipe, both ends closed when the test ends (a write end
// closed earlier ends its reader), and the path /dev/stdout resolves to
// when the write end is the standard output.
func testPipe(t *testing.T) (r, w *os.File, path string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w, fmt.Sprintf("/proc/self/fd/%d", w.Fd())
}

// writers is accepted on every receiver: a file receiver with several
// writes its batches one at a time, each line once, none torn.
func TestFileReceiverWithSeveralWritersWritesEachOccurrenceOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ev.jsonl")
	cfg, err := ParseConfig("c.yaml", []byte(`
route: {match: [{receiver: f}]}
receivers:
  - name: f
    file: {path: `+path+`}
    batch: 8
    writers: 4
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPipeline(cfg, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := publishN(t, p, 2000)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantEachOnce(t, readLines(t, path), want)
}

// Another program cutting the file short (logrotate's copytruncate) gets
// the next lines at the file's new end, as an appending writer
// (kubernetes-event-exporter's lumberjack) puts them: no hole of zero
// bytes where the old lines were; and after a crash, the lines written
// after a checkpoint taken since the cut are read back as stored.
func TestFileSinkWritesAtTheEndOfAFileAnotherProgramTruncated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ev.jsonl")
	s, err := NewFileSink(FileConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	writeSeq(t, s, 1, 4)
	if err := os.Truncate(path, 0); err != nil { // copytruncate
		t.Fatal(err)
	}
	writeSeq(t, s, 4, 6)
	mark := s.Mark(3) // the checkpoint after the cut covers Seq 1..3
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte{0}); n > 0 {
		t.Fatalf("the file has %d zero bytes where the truncated lines were", n)
	}
	if keys := readLines(t, path); len(keys) != 2 {
		t.Fatalf("%d lines after the cut, want the 2 written since: %v", len(keys), keys)
	}
	stored := storedAfterRestart(t, FileConfig{Path: path}, mark)
	for i := 4; i < 6; i++ {
		if _, ok := stored[Key("u"+strings.Repeat("x", i%3), int32(i))]; !ok {
			t.Errorf("Seq %d, written after the cut, is not reported stored", i)
		}
	}
}
