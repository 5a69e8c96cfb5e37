package exporter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestStdoutSinkWithSeveralWritersWritesEachLineOnceWhole(t *testing.T) {
	r, w, _ := testPipe(t)
	s := stdoutSinkOn(w, nil)
	read := make(chan []string, 1)
	go func() { read <- pipeLines(r) }()
	want := writeConcurrently(t, s, 4, 50, 8)
	w.Close()
	var got []string
	for _, l := range <-read {
		if !json.Valid([]byte(l)) {
			t.Fatalf("a torn line: %.120q", l)
		}
		got = append(got, lineKey([]byte(l)))
	}
	wantEachOnce(t, got, want)
}

func TestPipeSinkWithSeveralWritersWritesEachLineOnceWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	s, err := newPipeSink(&PipeConfig{Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := writeConcurrently(t, s, 4, 50, 8)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantEachOnce(t, readLines(t, path), want)
}

// shortWriter takes the first room bytes of what it is given, then fails
// until room is set again.
type shortWriter struct {
	out  bytes.Buffer
	room int
}

func (w *shortWriter) Write(b []byte) (int, error) {
	if len(b) <= w.room {
		w.room -= len(b)
		return w.out.Write(b)
	}
	n, _ := w.out.Write(b[:w.room])
	w.room = 0
	return n, errors.New("no space left on device")
}

// A write that stops in the middle of a line (a full disk under a
// redirected standard output) counts the lines before it as written; the
// next write finishes the torn line before its own, so the stream holds
// whole lines only: the line torn is written again whole on the retry (a
// duplicate), the lines before it are not.
func TestWriterSinkFinishesALineAWriteStoppedIn(t *testing.T) {
	w := &shortWriter{room: 1 << 20}
	s := &WriterSink{W: w}
	batch := []*Occurrence{occ("a", 1, "ns"), occ("b", 1, "ns"), occ("c", 1, "ns")}
	first, _, err := appendLines(nil, batch[:1], s.Encode.orDefault())
	if err != nil {
		t.Fatal(err)
	}
	w.room = len(first) + 10 // line a, and 10 bytes of line b
	n, err := s.Write(context.Background(), batch)
	if n != 1 || err == nil {
		t.Fatalf("Write = %d, %v: want 1 line written and the error", n, err)
	}
	w.room = 1 << 20
	if n, err := s.Write(context.Background(), batch[1:]); n != 2 || err != nil {
		t.Fatalf("the retry: Write = %d, %v", n, err)
	}
	var keys []string
	for _, line := range strings.SplitAfter(w.out.String(), "\n") {
		if line == "" {
			continue
		}
		if !json.Valid([]byte(line)) {
			t.Fatalf("torn line %q", line)
		}
		keys = append(keys, lineKey([]byte(line)))
	}
	if want := []string{"a/1", "b/1", "b/1", "c/1"}; !slices.Equal(keys, want) {
		t.Errorf("lines %v, want %v", keys, want)
	}
}

// A write that stops again inside the torn line's rest keeps what is left
// of it, and lines after it are counted only once written whole.
func TestLineWriterKeepsWhatIsLeftOfATornLine(t *testing.T) {
	w := &shortWriter{room: 4}
	var lw lineWriter
	if n, err := lw.write(nil, w, []byte("line1\nline2\n")); n != 0 || err == nil {
		t.Fatalf("write = %d, %v: want nothing whole and the error", n, err)
	}
	w.room = 1 // "1" of line1's rest "1\n"
	if n, err := lw.write(nil, w, []byte("line2\n")); n != 0 || err == nil {
		t.Fatalf("write = %d, %v: want nothing of b and the error", n, err)
	}
	w.room = 1 << 20
	if n, err := lw.write(nil, w, []byte("line2\n")); n != 1 || err != nil {
		t.Fatalf("write = %d, %v", n, err)
	}
	if got, want := w.out.String(), "line1\nline2\n"; got != want {
		t.Errorf("stream %q, want %q", got, want)
	}
}
