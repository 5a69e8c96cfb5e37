package vlogstest

import (
	"bytes"
	_ "embed" // binary.sh
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
// when its modules are not in the module cache yet) under an flock, so
// that concurrent callers, in this process or others, build it once.
func Binary() (string, error) {
	binMu.Lock()
	defer binMu.Unlock()
	if binPath != "" {
		return binPath, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("vlogstest: user cache dir: %w", err)
	}
	p := binaryPath(filepath.Join(cache, "fanout-e2e"))
	if !executable(p) {
		root, err := runScript()
		if err != nil {
			return "", err
		}
		if p = binaryPath(root); !executable(p) {
			return "", fmt.Errorf("vlogstest: %s missing after running the build script", p)
		}
	}
	binPath = p
	return p, nil
}

func binaryPath(root string) string {
	return filepath.Join(root, "victoria-logs-"+Version, "victoria-logs")
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// runScript runs the build script and returns the cache directory it
// printed on its last line of output.
func runScript() (string, error) {
	cmd := exec.Command("bash", "-c", buildScript, "binary.sh")
	// No context: if the test binary dies mid-build, the script finishes and
	// installs anyway, and the next caller finds the binary.
	cmd.Env = append(os.Environ(), "FANOUT_E2E_VLOGS_VERSION="+Version)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("vlogstest: binary.sh (embedded): %w\n%s", err, tail(stderr.Bytes(), 40))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	root := strings.TrimSpace(lines[len(lines)-1])
	if root == "" {
		return "", fmt.Errorf("vlogstest: binary.sh printed no cache directory\n%s", tail(stderr.Bytes(), 40))
	}
	return root, nil
}

// tail returns at most the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
