package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// exporterDir is the exporter module, relative to this package.
const exporterDir = "../.."

// The image written as an OCI layout reads back with the exporter's
// entrypoint, the non-root user and the metrics port, and its one layer
// holds one file, a static Linux binary of cmd/fanout-eventer that runs:
// it checks the example configuration.
func TestImageLayoutHoldsTheExporterAsItsNonRootEntrypoint(t *testing.T) {
	img, err := Build(context.Background(), Options{ExporterDir: exporterDir, Version: "v9.9.9-test", Arch: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteLayout(dir, img, "fanout-eventer:v9.9.9-test"); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].MediaType != types.OCIManifestSchema1 {
		t.Fatalf("index %+v, %v: want one OCI manifest", im, err)
	}
	got, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{Binary}) || c.User != User || cf.OS != "linux" || cf.Architecture != runtime.GOARCH ||
		len(c.Cmd) != 0 || c.Labels["org.opencontainers.image.version"] != "v9.9.9-test" {
		t.Errorf("config %+v (%s/%s): want entrypoint %s, user %s, linux/%s, the version label", c, cf.OS, cf.Architecture,
			Binary, User, runtime.GOARCH)
	}
	if _, ok := c.ExposedPorts[Port]; !ok {
		t.Errorf("exposed ports %v, want %s", c.ExposedPorts, Port)
	}
	layers, err := got.Layers()
	if err != nil || len(layers) != 1 || len(cf.RootFS.DiffIDs) != 1 {
		t.Fatalf("%d layers, %d diff IDs (%v): want one", len(layers), len(cf.RootFS.DiffIDs), err)
	}
	bin := extract(t, layers[0].Uncompressed)
	checkBinary(t, bin)
}

// extract returns the path of the layer's only file, /fanout-eventer,
// written to a temporary directory, checking its mode and owner.
func extract(t *testing.T, open func() (io.ReadCloser, error)) string {
	t.Helper()
	rc, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if "/"+hdr.Name != Binary || hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Typeflag != tar.TypeReg {
		t.Errorf("layer entry %s mode %o uid %d type %c: want %s, 0755, root's, a file", hdr.Name, hdr.Mode, hdr.Uid, hdr.Typeflag, Binary)
	}
	path := filepath.Join(t.TempDir(), "fanout-eventer")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, tr); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if next, err := tr.Next(); err != io.EOF {
		t.Errorf("another entry in the layer: %v, %v", next, err)
	}
	return path
}

// checkBinary checks that bin is cmd/fanout-eventer, built without cgo,
// and runs it.
func checkBinary(t *testing.T, bin string) {
	t.Helper()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if info.Path != "github.com/fanout-go/fanout/exporter/cmd/fanout-eventer" || settings["CGO_ENABLED"] != "0" ||
		settings["GOOS"] != "linux" || settings["-trimpath"] != "true" {
		t.Errorf("build info: path %s, settings %v: want cmd/fanout-eventer, static, linux, trimmed", info.Path, settings)
	}
	// -trimpath leaves -ldflags out of the build information: the version
	// linked in is looked for in the binary itself.
	if b, err := os.ReadFile(bin); err != nil || !bytes.Contains(b, []byte("v9.9.9-test")) {
		t.Errorf("the version v9.9.9-test is not in the binary (%v)", err)
	}
	out, err := exec.Command(bin, "--check-config", "--config", filepath.Join(exporterDir, "example.yaml")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "example.yaml: valid") {
		t.Errorf("the image's binary checking the example configuration: %v\n%s", err, out)
	}
}
