package apiservertest

import (
	"bytes"
	_ "embed" // binaries.sh
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	name, script := "apiservertest: binaries.sh (embedded)", buildScript
	if p := os.Getenv(ScriptEnv); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", "", fmt.Errorf("apiservertest: %s: %w", ScriptEnv, err)
		}
		name, script = "apiservertest: "+p, string(b)
	}
	kube := filepath.Join("kube-apiserver-"+KubeVersion, "kube-apiserver")
	paths, err := CachedBinaries([]string{kube, filepath.Join("etcd-"+EtcdVersion, "etcd")}, name, script,
		"FANOUT_E2E_KUBE_VERSION="+KubeVersion, "FANOUT_E2E_ETCD_VERSION="+EtcdVersion)
	if err != nil {
		return "", "", err
	}
	binAPIServer, binEtcd = paths[0], paths[1]
	return binAPIServer, binEtcd, nil
}

// CachedBinaries returns the paths of executables in the fanout-e2e cache
// directory (os.UserCacheDir()/fanout-e2e), given relative to it. When one
// is missing it runs script, a bash script's text (name for errors), with
// env added to the environment: the script builds them into that directory
// and prints the directory on its last line of output. binaries.sh is such
// a script, and the exporter's VictoriaLogs build another; each serialises
// its builders with an flock, so that concurrent callers, in this process
// or others, build once.
func CachedBinaries(rel []string, name, script string, env ...string) ([]string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, fmt.Errorf("%s: user cache dir: %w", name, err)
	}
	paths := inDir(filepath.Join(cache, "fanout-e2e"), rel)
	if slices.IndexFunc(paths, func(p string) bool { return !executable(p) }) < 0 {
		return paths, nil
	}
	root, err := runScript(name, script, env)
	if err != nil {
		return nil, err
	}
	paths = inDir(root, rel)
	for _, p := range paths {
		if !executable(p) {
			return nil, fmt.Errorf("%s: %s missing after running the build script", name, p)
		}
	}
	return paths, nil
}

func inDir(root string, rel []string) []string {
	out := make([]string, len(rel))
	for i, r := range rel {
		out[i] = filepath.Join(root, r)
	}
	return out
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// runScript runs the build script and returns the cache directory it
// printed on its last line of output.
func runScript(name, script string, env []string) (string, error) {
	cmd := exec.Command("bash", "-c", script, name)
	var stdout, stderr bytes.Buffer
	// No context: if the test binary dies mid-build, the script finishes and
	// installs anyway, and the next caller finds the binaries.
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", name, err, tail(stderr.Bytes(), 40))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	root := strings.TrimSpace(lines[len(lines)-1])
	if root == "" {
		return "", fmt.Errorf("%s printed no cache directory\n%s", name, tail(stderr.Bytes(), 40))
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
