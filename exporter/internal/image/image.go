package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed parts.
const (
	// Binary is the exporter's path in the image, its entrypoint.
	Binary = "/fanout-eventer"
	// User is the user and group the image runs as: distroless's
	// nonroot, which the manifests' securityContext (runAsUser 65532)
	// expects.
	User = "65532:65532"
	// Port is the port of --listen's default (/metrics and the probes).
	Port = "9102/tcp"
	// versionVar is the variable the version is linked into.
	versionVar = "github.com/fanout-go/fanout/exporter.Version"
)

// Options configures [Build].
type Options struct {
	// ExporterDir is the exporter module's directory (holding
	// cmd/fanout-eventer).
	ExporterDir string
	// Version is linked into the binary (fanout_eventer_build_info) and
	// labels the image; empty: the repository's VERSION file.
	Version string
	// Arch is the GOARCH to build for; empty: amd64.
	Arch string
	// Created is the image's creation time; zero: the Unix epoch, so
	// that the same sources make the same image.
	Created time.Time
}

// Build compiles the exporter and returns its image: one layer holding
// the binary at [Binary] (mode 0755, owned by root), with [Binary] as
// entrypoint, [User] as user and [Port] exposed, in OCI media types.
func Build(ctx context.Context, o Options) (v1.Image, error) {
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	if o.Version == "" {
		b, err := os.ReadFile(filepath.Join(o.ExporterDir, "..", "VERSION"))
		if err != nil {
			return nil, fmt.Errorf("image: version: %w", err)
		}
		o.Version = strings.TrimSpace(string(b))
	}
	bin, err := compile(ctx, o)
	if err != nil {
		return nil, err
	}
	layerTar, err := tarOf(bin, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base, err := mutate.ConfigFile(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON),
		types.OCIManifestSchema1), configFile(o))
	if err != nil {
		return nil, err
	}
	return mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: v1.History{
		Created: v1.Time{Time: o.Created}, CreatedBy: "go build -trimpath ./cmd/fanout-eventer (CGO_ENABLED=0)",
	}})
}

// compile builds cmd/fanout-eventer for linux/o.Arch, statically, and
// returns the binary.
func compile(ctx context.Context, o Options) ([]byte, error) {
	dir, err := os.MkdirTemp("", "fanout-eventer-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "fanout-eventer")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X "+versionVar+"="+o.Version,
		"-o", out, "./cmd/fanout-eventer")
	cmd.Dir = o.ExporterDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("image: go build: %w\n%s", err, b)
	}
	return os.ReadFile(out)
}

// tarOf returns a tar of the binary at [Binary].
func tarOf(bin []byte, mod time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: strings.TrimPrefix(Binary, "/"), Mode: 0o755, Size: int64(len(bin)),
		Typeflag: tar.TypeReg, ModTime: mod, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// configFile returns the image's configuration.
func configFile(o Options) *v1.ConfigFile {
	return &v1.ConfigFile{
		Architecture: o.Arch,
		OS:           "linux",
		Created:      v1.Time{Time: o.Created},
		Config: v1.Config{
			Entrypoint:   []string{Binary},
			User:         User,
			WorkingDir:   "/",
			ExposedPorts: map[string]struct{}{Port: {}},
			Labels: map[string]string{
				"org.opencontainers.image.title":    "fanout-eventer",
				"org.opencontainers.image.version":  o.Version,
				"org.opencontainers.image.source":   "https://github.com/fanout-go/fanout",
				"org.opencontainers.image.licenses": "Apache-2.0",
			},
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
}

// WriteLayout writes img as an OCI image layout in dir (created if
// needed), tagged ref (its org.opencontainers.image.ref.name).
func WriteLayout(dir string, img v1.Image, ref string) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
}
