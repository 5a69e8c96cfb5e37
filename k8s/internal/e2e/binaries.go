package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Versions of the binaries [Binaries] provides. They must match the defaults
// of hack/e2e-binaries.sh, which [Binaries] passes them to.
const (
	// KubeVersion is the kube-apiserver version.
	KubeVersion = "v1.34.4"
	// EtcdVersion is the etcd version.
	EtcdVersion = "v3.6.4"
)

// ScriptEnv, when set, overrides the location of hack/e2e-binaries.sh.
const ScriptEnv = "FANOUT_E2E_SCRIPT"

var (
	binMu        sync.Mutex
	binAPIServer string
	binEtcd      string
)

// Binaries returns the paths of the cached kube-apiserver and etcd binaries
// (os.UserCacheDir()/fanout-e2e/kube-apiserver-<KubeVersion>/kube-apiserver
// and .../etcd-<EtcdVersion>/etcd). When either is missing it runs
// hack/e2e-binaries.sh, which builds them (minutes when cold) under an flock,
// so concurrent callers, in this process or others, build them only once.
func Binaries() (apiserver, etcd string, err error) {
	binMu.Lock()
	defer binMu.Unlock()
	if binAPIServer != "" {
		return binAPIServer, binEtcd, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", "", fmt.Errorf("e2e: user cache dir: %w", err)
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
				return "", "", fmt.Errorf("e2e: %s missing after running the build script", p)
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

// runScript runs hack/e2e-binaries.sh and returns the cache directory it
// printed on its last line of output.
func runScript() (string, error) {
	script, err := scriptPath()
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	// No context: if the test binary dies mid-build, the script finishes and
	// installs anyway, and the next caller finds the binaries.
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(),
		"FANOUT_E2E_KUBE_VERSION="+KubeVersion,
		"FANOUT_E2E_ETCD_VERSION="+EtcdVersion,
	)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("e2e: %s: %w\n%s", script, err, tail(stderr.Bytes(), 40))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	root := strings.TrimSpace(lines[len(lines)-1])
	if root == "" {
		return "", fmt.Errorf("e2e: %s printed no cache directory\n%s", script, tail(stderr.Bytes(), 40))
	}
	return root, nil
}

// scriptPath locates hack/e2e-binaries.sh: $FANOUT_E2E_SCRIPT, else relative
// to this source file, else relative to the go.mod of the current module
// (tests run in their package directory inside the k8s module).
func scriptPath() (string, error) {
	if p := os.Getenv(ScriptEnv); p != "" {
		return p, nil
	}
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		p := filepath.Join(filepath.Dir(file), "..", "..", "hack", "e2e-binaries.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if gomod := strings.TrimSpace(string(out)); err == nil && gomod != "" && gomod != os.DevNull {
		p := filepath.Join(filepath.Dir(gomod), "hack", "e2e-binaries.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", errors.New("e2e: cannot locate hack/e2e-binaries.sh (tried " +
		strings.Join(tried, ", ") + "); set " + ScriptEnv)
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
