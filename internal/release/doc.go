// Package release knows how this repository's modules are released: every
// directory holding a go.mod is a module; all of them are released together
// under the one version in the VERSION file at the repository root, tagged
// "v0.1.0" for the root module and "<dir>/v0.1.0" for the module in <dir>
// (the tag names the Go command looks for).
//
// A module whose directory has an element named "internal" (such as this
// one, internal/release) is not released: Go forbids importing it from
// outside the repository anyway. Directories named testdata or vendor, or
// starting with "." or "_", are not searched.
//
// [Check] verifies that the modules are ready to be tagged: each nested
// module requires its siblings at the recorded version, and reaches them
// through a replace for development inside the repository only.
// [WriteProxy] packages the released modules as that version into a
// file-based module proxy (GOPROXY=file://DIR), the layout `go mod download`
// reads, so that a test can `go get` them as a user would.
//
// This module is not released and is no API: it serves `make
// release-check` (cmd/release-check) and the tests in this directory.
package release
