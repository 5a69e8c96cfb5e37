package chromiumtest

import (
	_ "embed" // binary.sh
	"path/filepath"
	"sync"

	"github.com/fanout-go/fanout/k8s/apiservertest"
)

// installScript is binary.sh, which `make e2e-binaries` runs too: embedded,
// so that a test finds the browser without knowing where the repository
// is.
//
//go:embed binary.sh
var installScript string

var (
	binMu   sync.Mutex
	binPath string
)

// Binary returns the path of the cached chromium wrapper,
// os.UserCacheDir()/fanout-e2e/chromium/chromium, which runs the unpacked
// browser with its libraries. When it is missing it runs the install
// script (binary.sh, embedded) under an flock, as
// [apiservertest.CachedBinaries] does for kube-apiserver and etcd.
func Binary() (string, error) {
	binMu.Lock()
	defer binMu.Unlock()
	if binPath == "" {
		paths, err := apiservertest.CachedBinaries([]string{filepath.Join("chromium", "chromium")},
			"chromiumtest: binary.sh (embedded)", installScript)
		if err != nil {
			return "", err
		}
		binPath = paths[0]
	}
	return binPath, nil
}
