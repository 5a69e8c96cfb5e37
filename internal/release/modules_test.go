package release

import (
	"slices"
	"testing"
)

// Every directory with a go.mod is a module, the root first; testdata,
// vendor, hidden and underscore directories are not searched; modules
// under an internal/ directory are not released; tags are Dir/version.
func TestModulesFindsEveryGoModAndReleasesAllButInternal(t *testing.T) {
	root := writeTree(t, map[string]string{
		"go.mod":                       "module example.com/r\n",
		"VERSION":                      "v0.3.0\n",
		"a/go.mod":                     "module example.com/r/a\n",
		"a/b/go.mod":                   "module example.com/r/a/b\n",
		"internal/tool/go.mod":         "module example.com/r/internal/tool\n",
		"testdata/x/go.mod":            "module example.com/x\n",
		"vendor/v/go.mod":              "module example.com/v\n",
		".hidden/go.mod":               "module example.com/h\n",
		"_old/go.mod":                  "module example.com/o\n",
		"pkg/only/a.go":                "package only\n",
		"a/internal/nested/sub/go.mod": "module example.com/r/a/internal/nested/sub\n",
	})
	mods, err := Modules(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs, released, tags []string
	for _, m := range mods {
		dirs = append(dirs, m.Dir)
		if m.Released() {
			released = append(released, m.Path)
			tags = append(tags, m.Tag("v0.3.0"))
		}
	}
	if want := []string{".", "a", "a/b", "a/internal/nested/sub", "internal/tool"}; !slices.Equal(dirs, want) {
		t.Errorf("module dirs %q, want %q", dirs, want)
	}
	if want := []string{"example.com/r", "example.com/r/a", "example.com/r/a/b"}; !slices.Equal(released, want) {
		t.Errorf("released %q, want %q", released, want)
	}
	if want := []string{"v0.3.0", "a/v0.3.0", "a/b/v0.3.0"}; !slices.Equal(tags, want) {
		t.Errorf("tags %q, want %q", tags, want)
	}
	v, err := ReadVersion(root)
	if err != nil || v != "v0.3.0" {
		t.Errorf("ReadVersion = %q, %v; want v0.3.0", v, err)
	}
}

// VERSION must hold one canonical semantic version.
func TestReadVersionRejectsNonCanonicalVersions(t *testing.T) {
	for _, v := range []string{"0.1.0", "v0.1", "v0.1.0+build", "v01.0.0", "", "latest"} {
		root := writeTree(t, map[string]string{"VERSION": v + "\n"})
		if got, err := ReadVersion(root); err == nil {
			t.Errorf("ReadVersion(%q) = %q, want an error", v, got)
		}
	}
}

// This repository: the root module and the k8s adapter are released, and
// this module is not.
func TestModulesOfThisRepository(t *testing.T) {
	mods, err := Modules(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, m := range mods {
		got[m.Path] = m.Released()
	}
	for path, released := range map[string]bool{
		"github.com/fanout-go/fanout":                  true,
		"github.com/fanout-go/fanout/k8s":              true,
		"github.com/fanout-go/fanout/internal/release": false,
	} {
		if r, ok := got[path]; !ok || r != released {
			t.Errorf("%s: found %v, released %v; want found, released %v", path, ok, r, released)
		}
	}
}
