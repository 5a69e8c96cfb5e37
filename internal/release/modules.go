package release

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// VersionFile is the file, at the repository root, that records the version
// every module is released under.
const VersionFile = "VERSION"

// Module is one module of the repository.
type Module struct {
	// Dir is the module's directory relative to the repository root, with
	// slashes: "." for the root module.
	Dir string
	// Path is the module path declared in its go.mod.
	Path string
	// GoMod is the parsed go.mod.
	GoMod *modfile.File
}

// Released reports whether m is released: its directory has no element
// named "internal".
func (m Module) Released() bool {
	return !slices.Contains(strings.Split(m.Dir, "/"), "internal")
}

// Tag returns the Git tag that releases m at version: version itself for
// the root module, else Dir/version.
func (m Module) Tag(version string) string {
	if m.Dir == "." {
		return version
	}
	return m.Dir + "/" + version
}

// ReadVersion returns the version recorded in root/VERSION, which must be a
// canonical semantic version such as v0.1.0.
func ReadVersion(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, VersionFile))
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" {
		return "", fmt.Errorf("%s: %q is not a canonical semantic version such as v0.1.0", VersionFile, v)
	}
	return v, nil
}

// Modules returns every module under root, the root module first, then by
// directory.
func Modules(root string) ([]Module, error) {
	var mods []Module
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		gomod := filepath.Join(p, "go.mod")
		data, err := os.ReadFile(gomod)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		f, err := modfile.Parse(gomod, data, nil)
		if err != nil {
			return err
		}
		if f.Module == nil {
			return fmt.Errorf("%s: no module directive", gomod)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		mods = append(mods, Module{Dir: filepath.ToSlash(rel), Path: f.Module.Mod.Path, GoMod: f})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(mods) == 0 || mods[0].Dir != "." {
		return nil, fmt.Errorf("%s: no go.mod at the repository root", root)
	}
	slices.SortFunc(mods[1:], func(a, b Module) int { return strings.Compare(a.Dir, b.Dir) })
	return mods, nil
}
