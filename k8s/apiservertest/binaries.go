package apiservertest

import (
	"bytes"
	_ "embed" // binaries.sh
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Versions of the binaries [Binaries] provides. They must match the defaults
// of binaries.sh, which [Binaries] passes them to.
const (
	// KubeVersion is the kube-apiserver version.
	KubeVersion = "v1.34.4"
	// EtcdVersion is the etcd version.
	EtcdVersion = "v3.6.4"
)

// ScriptEnv, when set, names a build script to run instead of the
// binaries.sh embedded in this package.
const ScriptEnv = "FANOUT_E2E_SCRIPT"

// buildScript is binaries.sh, the script `make e2e-binaries` runs: embedded,
// so that a test of any module (or a copy of this package in the module
// cache) can build the binaries without knowing where the repository is.
//
//go:embed binaries.sh
var buildScript string

var (
	binMu        sync.Mutex
	binAPIServer string
	binEtcd      string
)

// Binaries returns the paths of the cached kube-apiserver and etcd binaries
// (os.UserCacheDir()/fanout-e2e/kube-apiserver-<KubeVersion>/kube-apiserver
// and .../etcd-<EtcdVersion>/etcd). When either is missing it runs the
// build script (binaries.sh, embedded), which builds them from the Go module
// proxy (about 7 minutes on 2 cores, with a throwaway build cache) under an
// flock, so concurrent callers, in this process or others, build them only
// once.
func Binaries() (apiserver, etcd string, err error) {
	binMu.Lock()
	defer binMu.Unlock()
	if binAPIServer != "" {
		return binAPIServer, binEtcd, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", "", fmt.Errorf("apiservertest: user cache dir: %w", err)
	}
	apiserver, etcd = binaryPaths(filepath.Join(cache, "fanout-e2e"))
	if !executable(apiserver) || !executable(etcd) {
		root, err := runScript()
		if err != nil {
			return "", "", err
		}
		apiserver, etcd = binaryPaths(root)
		for _, p := range []string{apiserver, etcd} {
			if !executable(p) {
				return "", "", fmt.Errorf("apiservertest: %s missing after running the build script", p)
			}
		}
	}
	binAPIServer, binEtcd = apiserver, etcd
	return apiserver, etcd, nil
}

func binaryPaths(root string) (apiserver, etcd string) {
	return filepath.Join(root, "kube-apiserver-"+KubeVersion, "kube-apiserver"),
		filepath.Join(root, "etcd-"+EtcdVersion, "etcd")
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// runScript runs the build script and returns the cache directory it
// printed on its last line of output.
func runScript() (string, error) {
	name := "binaries.sh (embedded)"
	cmd := exec.Command("bash", "-c", buildScript, "binaries.sh")
	if p := os.Getenv(ScriptEnv); p != "" {
		name = p
		cmd = exec.Command("bash", p)
	}
	var stdout, stderr bytes.Buffer
	// No context: if the test binary dies mid-build, the script finishes and
	// installs anyway, and the next caller finds the binaries.
	cmd.Env = append(os.Environ(),
		"FANOUT_E2E_KUBE_VERSION="+KubeVersion,
		"FANOUT_E2E_ETCD_VERSION="+EtcdVersion,
	)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("apiservertest: %s: %w\n%s", name, err, tail(stderr.Bytes(), 40))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	root := strings.TrimSpace(lines[len(lines)-1])
	if root == "" {
		return "", fmt.Errorf("apiservertest: %s printed no cache directory\n%s", name, tail(stderr.Bytes(), 40))
	}
	return root, nil
}

// tail returns at most the last n lines of b.
func tail(b []byte, n int) string {
	s := strings.TrimRight(string(b), "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
