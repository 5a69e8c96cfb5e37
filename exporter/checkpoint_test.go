package exporter

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

func TestCheckpointStoresRoundTrip(t *testing.T) {
	ck := &Checkpoint{Version: 1, ResourceVersion: "42", Counts: map[string]int32{"a": 3, "b": 1},
		Marks: map[string]string{"file": "1:100"}}
	for name, s := range map[string]CheckpointStore{
		"file":      FileStore{Path: filepath.Join(t.TempDir(), "ck.json")},
		"configmap": ConfigMapStore{Client: fake.NewClientset(), Namespace: "ns", Name: "ck"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if got, err := s.Load(ctx); got != nil || err != nil {
				t.Fatalf("Load before any Save: %v, %v; want nothing", got, err)
			}
			for range 2 { // create, then replace
				if err := s.Save(ctx, ck); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got.ResourceVersion != "42" || got.Counts["a"] != 3 || got.Counts["b"] != 1 || got.Marks["file"] != "1:100" {
				t.Errorf("loaded %+v, want %+v", got, ck)
			}
		})
	}
}

func TestCheckpointFileInAnUnknownFormatIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ck.json")
	for _, content := range []string{"not json", `{"version": 7}`} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := (FileStore{Path: path}).Load(context.Background()); err == nil {
			t.Errorf("%q loaded without error", content)
		}
	}
}

// The README's /var/lib/fanout-eventer/checkpoint.json on a fresh volume:
// the directory is created at the first save.
func TestCheckpointFileStoreCreatesItsDirectory(t *testing.T) {
	s := FileStore{Path: filepath.Join(t.TempDir(), "fanout-eventer", "checkpoint.json")}
	if err := s.Save(context.Background(), &Checkpoint{Version: checkpointVersion, ResourceVersion: "7"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(context.Background()); err != nil || got == nil || got.ResourceVersion != "7" {
		t.Errorf("loaded %+v, %v; want the checkpoint saved", got, err)
	}
}
