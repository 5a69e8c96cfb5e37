package rsyslogtest

import (
	_ "embed" // binary.sh
	"path/filepath"
	"sync"

	"github.com/fanout-go/fanout/k8s/apiservertest"
)

// installScript is binary.sh, which `make e2e-binaries` runs too: embedded,
// so that a test finds the daemon without knowing where the repository is.
//
//go:embed binary.sh
var installScript string

var (
	binMu   sync.Mutex
	binPath string
)

// Binary returns the path of the cached rsyslogd wrapper,
// os.UserCacheDir()/fanout-e2e/rsyslog/rsyslogd. When it is missing it runs
// the install script (binary.sh, embedded), which unpacks Debian's rsyslog
// package there (apt-get download, dpkg -x: seconds), under an flock, as
// [apiservertest.CachedBinaries] does for kube-apiserver and etcd.
func Binary() (string, error) {
	binMu.Lock()
	defer binMu.Unlock()
	if binPath != "" {
		return binPath, nil
	}
	paths, err := apiservertest.CachedBinaries([]string{filepath.Join("rsyslog", "rsyslogd")},
		"rsyslogtest: binary.sh (embedded)", installScript)
	if err != nil {
		return "", err
	}
	binPath = paths[0]
	return binPath, nil
}
