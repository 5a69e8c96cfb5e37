package vlogstest

import (
	_ "embed" // binary.sh
	"path/filepath"
	"sync"

	"github.com/fanout-go/fanout/k8s/apiservertest"
)

// Version is the VictoriaLogs version [Binary] provides. It must match the
// default of binary.sh, which [Binary] passes it to.
const Version = "v1.52.1"

// buildScript is binary.sh, which `make e2e-binaries` runs too: embedded,
// so that a test finds the binary without knowing where the repository is.
//
//go:embed binary.sh
var buildScript string

var (
	binMu   sync.Mutex
	binPath string
)

// Binary returns the path of the cached victoria-logs binary,
// os.UserCacheDir()/fanout-e2e/victoria-logs-<Version>/victoria-logs. When
// it is missing it runs the build script (binary.sh, embedded), which
// builds it from the Go module proxy (20 to 30 s on 2 cores, about 70 s
// when its modules are not in the module cache yet) under an flock, as
// [apiservertest.CachedBinaries] does for kube-apiserver and etcd.
func Binary() (string, error) {
	binMu.Lock()
	defer binMu.Unlock()
	if binPath != "" {
		return binPath, nil
	}
	paths, err := apiservertest.CachedBinaries([]string{filepath.Join("victoria-logs-"+Version, "victoria-logs")},
		"vlogstest: binary.sh (embedded)", buildScript, "FANOUT_E2E_VLOGS_VERSION="+Version)
	if err != nil {
		return "", err
	}
	binPath = paths[0]
	return binPath, nil
}
