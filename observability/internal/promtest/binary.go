package promtest

import (
	_ "embed" // binary.sh
	"path/filepath"
	"sync"

	"github.com/fanout-go/fanout/k8s/apiservertest"
)

// installScript is binary.sh, which `make e2e-binaries` runs too: embedded,
// so that a test finds the binaries without knowing where the repository
// is.
//
//go:embed binary.sh
var installScript string

var (
	binMu    sync.Mutex
	binPaths []string
)

// Binaries returns the paths of the cached prometheus and promtool,
// os.UserCacheDir()/fanout-e2e/prometheus/{prometheus,promtool}. When they
// are missing it runs the install script (binary.sh, embedded), which
// unpacks Debian's prometheus package there (apt-get download, dpkg -x:
// seconds), under an flock, as [apiservertest.CachedBinaries] does for
// kube-apiserver and etcd.
func Binaries() (prometheus, promtool string, err error) {
	binMu.Lock()
	defer binMu.Unlock()
	if binPaths == nil {
		paths, err := apiservertest.CachedBinaries(
			[]string{filepath.Join("prometheus", "prometheus"), filepath.Join("prometheus", "promtool")},
			"promtest: binary.sh (embedded)", installScript)
		if err != nil {
			return "", "", err
		}
		binPaths = paths
	}
	return binPaths[0], binPaths[1], nil
}
