// Command fanout-eventer-image builds the fanout-eventer image without a
// container runtime (see package image) and writes it as an OCI image
// layout, or pushes it to a registry with the credentials of
// ~/.docker/config.json:
//
//	cd exporter/internal/image
//	go run ./cmd/fanout-eventer-image -o /tmp/fanout-eventer-oci       # then: crane push /tmp/fanout-eventer-oci REF
//	go run ./cmd/fanout-eventer-image -push registry.example/fanout-eventer:v0.1.0
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/fanout-go/fanout/exporter/internal/image"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	out := flag.String("o", "", "write the image as an OCI image layout in this directory")
	push := flag.String("push", "", "push the image to this reference (registry/repository:tag)")
	arch := flag.String("arch", "amd64", "GOARCH of the binary")
	version := flag.String("version", "", "version linked in and labelled (default: the repository's VERSION)")
	exporterDir := flag.String("exporter", "../..", "the exporter module's directory")
	flag.Parse()
	if (*out == "") == (*push == "") {
		fmt.Fprintln(os.Stderr, "usage: fanout-eventer-image (-o DIR | -push REF) [-arch GOARCH] [-version V]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *exporterDir, *arch, *version, *out, *push); err != nil {
		fmt.Fprintln(os.Stderr, "fanout-eventer-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, exporterDir, arch, version, out, push string) error {
	img, err := image.Build(ctx, image.Options{ExporterDir: exporterDir, Version: version, Arch: arch})
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if out != "" {
		if err := image.WriteLayout(out, img, "fanout-eventer:"+version); err != nil {
			return err
		}
		fmt.Printf("%s: fanout-eventer image %s\n", out, digest)
		return nil
	}
	ref, err := name.ParseReference(push)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", ref, digest)
	return nil
}
