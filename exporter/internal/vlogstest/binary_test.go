package vlogstest

import (
	"strings"
	"testing"
)

// The embedded binary.sh defaults to Version, so that `make e2e-binaries`
// (which runs it without arguments) fills the cache Binary reads.
func TestBuildScriptDefaultsToThePackageVersion(t *testing.T) {
	if want := `FANOUT_E2E_VLOGS_VERSION:-` + Version + `}`; !strings.Contains(buildScript, want) {
		t.Errorf("binary.sh lacks %q", want)
	}
}
