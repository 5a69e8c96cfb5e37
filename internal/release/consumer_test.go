package release

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A user outside the repository, with only a module proxy, gets every
// released module at the version in VERSION: the modules are packaged from
// the current tree into a file-based proxy (what tagging them would publish),
// and fresh modules in temporary directories `go get` them through it, with
// the real proxy behind it for third-party modules only. Replace directives
// in the packaged go.mod files play no part, as for any consumer.
func TestReleasedModulesResolveForAConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("packages every module and builds programs against them (a minute warm, ten cold): make test runs it")
	}
	version, err := ReadVersion(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	mods, err := Modules(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if problems := Check(version, mods); len(problems) > 0 {
		t.Fatalf("not ready to release %s (make release-check):\n%s", version, strings.Join(problems, "\n"))
	}
	proxy := t.TempDir()
	if err := WriteProxy(proxy, repoRoot, version, mods); err != nil {
		t.Fatal(err)
	}
	c := newConsumerEnv(t, proxy, mods)

	t.Run("core with the README quick start", func(t *testing.T) {
		dir := c.module(t, "example.com/quickstart")
		c.goCmd(t, dir, "get", "github.com/fanout-go/fanout@"+version)
		src := quickStart(t)
		if !strings.HasPrefix(src, "package main\n") {
			t.Fatalf("the README quick start is not a whole program (package main ...):\n%s", src)
		}
		writeFile(t, filepath.Join(dir, "main.go"), src)
		if out := c.goCmd(t, dir, "run", "."); out != "hello\nworld\n" {
			t.Errorf("the quick start printed %q, want %q", out, "hello\nworld\n")
		}
		c.checkFanoutModules(t, dir, version)
		c.checkNoModule(t, dir, "k8s.io/", "the core must need nothing from Kubernetes")
	})

	t.Run("k8s record in a client-go style controller", func(t *testing.T) {
		dir := c.module(t, "example.com/controller")
		c.goCmd(t, dir, "get", "github.com/fanout-go/fanout/k8s@"+version)
		src, err := os.ReadFile(filepath.Join("testdata", "recorder", "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "main.go"), string(src))
		want := "web-1 Synced \"synced web-1\" count 3\nrecorded 3, dropped 0\n"
		if out := c.goCmd(t, dir, "run", "."); out != want {
			t.Errorf("the recorder printed %q, want %q", out, want)
		}
		c.checkFanoutModules(t, dir, version)
		c.checkNoModule(t, dir, "github.com/prometheus/", "a program using k8s/record without k8s/metrics must not need Prometheus")
		deps := strings.Fields(c.goCmd(t, dir, "list", "-deps", "."))
		if !slices.Contains(deps, "github.com/fanout-go/fanout/k8s/record") {
			t.Fatal("go list -deps lacks k8s/record: the check proves nothing")
		}
		for _, d := range deps {
			if strings.HasPrefix(d, "github.com/prometheus/") {
				t.Errorf("the recorder links %s", d)
			}
		}
	})

	t.Run("every released module builds", func(t *testing.T) {
		dir := c.module(t, "example.com/everything")
		args := []string{"get"}
		for _, m := range mods {
			if m.Released() {
				args = append(args, m.Path+"@"+version)
			}
		}
		c.goCmd(t, dir, args...)
		c.goCmd(t, dir, "build", mods[0].Path+"/...")
		got := c.checkFanoutModules(t, dir, version)
		for _, m := range mods {
			if m.Released() != slices.Contains(got, m.Path) {
				t.Errorf("%s: released %v, but in the consumer's build list: %v", m.Path, m.Released(), !m.Released())
			}
		}
	})
}

// consumerEnv runs the go command as a user outside the repository would,
// with the file proxy first.
type consumerEnv struct {
	env   []string
	gosum string // go.sum lines of the repository's modules, to seed consumers with
	root  string // the root module's path
}

func newConsumerEnv(t *testing.T, proxy string, mods []Module) *consumerEnv {
	t.Helper()
	goenv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	// A module cache of its own: the shared one would keep the packaged
	// modules under their real version, stale on the next run and wrong
	// once the real release exists. Third-party modules come from the
	// shared cache's download directory (a proxy in its own right) before
	// the network, and -trimpath keeps build-cache entries valid across
	// module cache directories, so a second run compiles almost nothing.
	// Built as this test is (raceFlag), the consumers reuse the packages
	// make test compiled for the tests, with the race detector and
	// -trimpath (see the Makefile): from empty caches, building every
	// module's dependencies once more without it took minutes.
	proxies := []string{"file://" + filepath.ToSlash(proxy),
		"file://" + filepath.ToSlash(filepath.Join(goenv("GOMODCACHE"), "cache", "download"))}
	if real := goenv("GOPROXY"); real != "" && real != "off" {
		proxies = append(proxies, real)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GOFLAGS", "GOPROXY", "GOMODCACHE", "GONOSUMDB", "GONOPROXY", "GOPRIVATE", "GOWORK", "GOTOOLCHAIN":
			return true
		}
		return false
	})
	env = append(env,
		"GOFLAGS=-mod=mod -modcacherw -trimpath"+raceFlag,
		"GOPROXY="+strings.Join(proxies, ","),
		"GOMODCACHE="+filepath.Join(t.TempDir(), "modcache"),
		// The packaged modules are not in the checksum database.
		"GONOSUMDB="+mods[0].Path,
		"GOWORK=off",
		"GOTOOLCHAIN=local",
	)
	var sum bytes.Buffer
	seen := map[string]bool{}
	for _, m := range mods {
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(m.Dir), "go.sum"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if l := sc.Text(); l != "" && !seen[l] {
				seen[l] = true
				sum.WriteString(l + "\n")
			}
		}
	}
	return &consumerEnv{env: env, gosum: sum.String(), root: mods[0].Path}
}

// module creates a fresh module outside the repository. Its go.sum starts
// with the repository's checksums, which were verified when they were
// added, so that the checksum database is asked only about the rest.
func (c *consumerEnv) module(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	c.goCmd(t, dir, "mod", "init", path)
	writeFile(t, filepath.Join(dir, "go.sum"), c.gosum)
	return dir
}

// goCmd runs go with args in dir and returns its standard output, failing
// t with the standard error if it fails.
func (c *consumerEnv) goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = c.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// checkFanoutModules checks that every module of this repository in dir's
// build list is at version, not replaced, and returns their paths.
func (c *consumerEnv) checkFanoutModules(t *testing.T, dir, version string) []string {
	t.Helper()
	var paths []string
	for _, l := range strings.Split(strings.TrimSpace(c.goCmd(t, dir, "list", "-m", "-f", "{{.Path}} {{.Version}} {{.Replace}}", "all")), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || (f[0] != c.root && !strings.HasPrefix(f[0], c.root+"/")) {
			continue
		}
		paths = append(paths, f[0])
		if f[1] != version || (len(f) > 2 && f[2] != "<nil>") {
			t.Errorf("consumer build list has %q, want %s %s, not replaced", l, f[0], version)
		}
	}
	if len(paths) == 0 {
		t.Error("no module of this repository in the consumer's build list")
	}
	return paths
}

// checkNoModule fails t if a module whose path starts with prefix is in
// the module graph of dir (go list -m all), for the reason why.
func (c *consumerEnv) checkNoModule(t *testing.T, dir, prefix, why string) {
	t.Helper()
	for _, m := range strings.Fields(c.goCmd(t, dir, "list", "-m", "-f", "{{.Path}}", "all")) {
		if strings.HasPrefix(m, prefix) {
			t.Errorf("go list -m all has %s: %s", m, why)
		}
	}
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o666); err != nil {
		t.Fatal(err)
	}
}
