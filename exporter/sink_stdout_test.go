package exporter

import (
	"context"
	"encoding/json"
	"path/filepath"
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
