package apiservertest

import (
	"strings"
	"testing"
)

// The embedded binaries.sh defaults to KubeVersion and EtcdVersion, so that
// `make e2e-binaries` (which runs it without arguments) fills the cache
// Binaries reads.
func TestBuildScriptDefaultsToThePackageVersions(t *testing.T) {
	for _, want := range []string{
		`FANOUT_E2E_KUBE_VERSION:-` + KubeVersion + `}`,
		`FANOUT_E2E_ETCD_VERSION:-` + EtcdVersion + `}`,
	} {
		if !strings.Contains(buildScript, want) {
			t.Errorf("binaries.sh lacks %q", want)
		}
	}
}
