package exporter

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const checkpointVersion = 1

// Checkpoint is what the exporter persists: what every sink has finished
// with. It is written as JSON.
type Checkpoint struct {
	// Version is the format version, 1.
	Version int `json:"version"`
	// ResourceVersion is the resource version of the last event change
	// the checkpoint covers.
	ResourceVersion string `json:"resourceVersion"`
	// Counts holds, for every live event the exporter has seen, the last
	// count forwarded, by event UID. Deleted events leave it.
	Counts map[string]int32 `json:"counts"`
	// Marks holds, by receiver name, the position of sinks that implement
	// [Marker], so that they can tell after a crash what they stored after
	// the checkpoint.
	Marks map[string]string `json:"marks,omitempty"`
	// Written is when the checkpoint was written.
	Written time.Time `json:"written"`

	// Seq is the last Seq covered, in this process only.
	Seq uint64 `json:"-"`
}

// CheckpointStore loads and saves checkpoints.
type CheckpointStore interface {
	// Load returns the saved checkpoint, or nil and no error if there is
	// none yet.
	Load(ctx context.Context) (*Checkpoint, error)
	// Save replaces the saved checkpoint.
	Save(ctx context.Context, c *Checkpoint) error
}

// FileStore keeps the checkpoint in a file, replaced atomically (written to
// a temporary file in the same directory, synced, renamed). The directory
// is created (mode 0755, the file itself is 0600) if it does not exist.
type FileStore struct {
	// Path is the checkpoint file.
	Path string
}

// Load reads the checkpoint file; a missing file is no checkpoint.
func (s FileStore) Load(context.Context) (*Checkpoint, error) {
	b, err := os.ReadFile(s.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return decodeCheckpoint(b, s.Path)
}

// Save writes the checkpoint file atomically.
func (s FileStore) Save(_ context.Context, c *Checkpoint) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f, err := s.createTemp()
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), s.Path)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// createTemp creates a temporary file beside Path, and Path's directory
// first if it does not exist (a fresh volume).
func (s FileStore) createTemp() (*os.File, error) {
	dir, pattern := filepath.Dir(s.Path), "."+filepath.Base(s.Path)+".tmp*"
	f, err := os.CreateTemp(dir, pattern)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o755); err == nil {
			f, err = os.CreateTemp(dir, pattern)
		}
	}
	return f, err
}

// check reports whether the checkpoint can be written: it creates Path's
// directory if needed, and a temporary file there, which it removes.
func (s FileStore) check() error {
	f, err := s.createTemp()
	if err != nil {
		return fmt.Errorf("checkpoint %s cannot be written: %w", s.Path, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

func decodeCheckpoint(b []byte, where string) (*Checkpoint, error) {
	var c Checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", where, err)
	}
	if c.Version != checkpointVersion {
		return nil, fmt.Errorf("checkpoint %s: unknown version %d", where, c.Version)
	}
	if c.Counts == nil {
		c.Counts = map[string]int32{}
	}
	return &c, nil
}

// ConfigMapKey is the binaryData key of the checkpoint in a ConfigMap: the
// checkpoint's JSON, gzipped (a ConfigMap holds at most 1 MiB; 20,000 live
// events take about 450 KB).
const ConfigMapKey = "checkpoint.json.gz"

// ConfigMapStore keeps the checkpoint in a ConfigMap, which it creates on
// the first save. It needs get, create and update on that ConfigMap.
type ConfigMapStore struct {
	// Client talks to the API server.
	Client kubernetes.Interface
	// Namespace and Name locate the ConfigMap.
	Namespace, Name string
}

// Load reads the ConfigMap; a missing ConfigMap or key is no checkpoint.
func (s ConfigMapStore) Load(ctx context.Context) (*Checkpoint, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	z, ok := cm.BinaryData[ConfigMapKey]
	if !ok {
		return nil, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("checkpoint configmap %s/%s: %w", s.Namespace, s.Name, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("checkpoint configmap %s/%s: %w", s.Namespace, s.Name, err)
	}
	return decodeCheckpoint(b, "configmap "+s.Namespace+"/"+s.Name)
}

// Save writes the checkpoint into the ConfigMap, creating it if needed.
func (s ConfigMapStore) Save(ctx context.Context, c *Checkpoint) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(b)
	_ = zw.Close()
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	cm, err := cms.Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name},
			BinaryData: map[string][]byte{ConfigMapKey: z.Bytes()}}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	} else if err == nil {
		if cm.BinaryData == nil {
			cm.BinaryData = map[string][]byte{}
		}
		cm.BinaryData[ConfigMapKey] = z.Bytes()
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
