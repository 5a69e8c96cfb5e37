// Package image builds the fanout-eventer container image without a
// container runtime: it compiles cmd/fanout-eventer statically for Linux
// (CGO_ENABLED=0; the CA roots and time zones are compiled in, see the
// command's imports) and puts the binary alone in one layer, run as the
// non-root user 65532 ([Build]), written as an OCI image layout
// ([WriteLayout]) that registries' tools push (crane, skopeo, oras) or
// cmd/fanout-eventer-image pushes itself. It uses
// github.com/google/go-containerregistry, the library behind crane and ko.
// Its tests build the image and check it: its configuration (entrypoint,
// user, port), and that the binary in its layer is the exporter, by
// running it. It is a module of its own so that only it carries the
// registry library; it is not released (its directory is internal).
package image
