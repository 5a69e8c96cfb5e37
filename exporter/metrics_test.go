package exporter

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// checkpointSeries returns the names of the fanout_eventer_checkpoint_
// series m exports for a pipeline with store (nil: no checkpoint).
func checkpointSeries(t *testing.T, store CheckpointStore) []string {
	t.Helper()
	p, err := NewPipeline(testConfig(t, &memSink{}), PipelineOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	m := NewMetrics()
	m.pipeline.Store(p)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "fanout_eventer_checkpoint_") {
			out = append(out, mf.GetName())
		}
	}
	return out
}

// Without a checkpoint (no `checkpoint:`), nothing is ever written: the
// checkpoint's series would say that changes wait for a write that never
// comes (FanoutEventerCheckpointBehind). They are exported only with one.
func TestCheckpointMetricsAreExportedOnlyWithACheckpoint(t *testing.T) {
	if got := checkpointSeries(t, nil); len(got) > 0 {
		t.Errorf("without a checkpoint: %v", got)
	}
	got := checkpointSeries(t, FileStore{Path: filepath.Join(t.TempDir(), "ck.json")})
	want := []string{"fanout_eventer_checkpoint_failures_total", "fanout_eventer_checkpoint_pending",
		"fanout_eventer_checkpoint_writes_total"}
	if !slices.Equal(got, want) {
		t.Errorf("with a checkpoint: %v, want %v", got, want)
	}
}
