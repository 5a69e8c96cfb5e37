package awstest

import (
	"encoding/json"
	"strings"
	"testing"
)

// The embedded emulators.sh defaults to Version, so that `make
// e2e-binaries` (which runs it without arguments) fills the cache Dir
// reads.
func TestInstallScriptDefaultsToThePackageVersion(t *testing.T) {
	if want := `FANOUT_E2E_AWS_EMULATORS_VERSION:-` + Version + `}`; !strings.Contains(installScript, want) {
		t.Errorf("emulators.sh lacks %q", want)
	}
}

// Version names the pinned versions, so that a change of them installs
// anew rather than reusing an install of others.
func TestVersionNamesThePinnedEmulators(t *testing.T) {
	b, err := npmFiles.ReadFile("npm/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct{ Dependencies map[string]string }
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	if want := "fauxqs-" + pkg.Dependencies["fauxqs"] + "-kinesalite-" + pkg.Dependencies["kinesalite"]; Version != want {
		t.Errorf("Version %q, want %q from npm/package.json", Version, want)
	}
}
