package release

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/semver"
)

// Check reports what keeps the modules from being released at version, one
// line per problem; none means they are ready to be tagged. It checks that:
//
//   - every module's path is the root module's path followed by its
//     directory, so that the tag Dir/version names it;
//   - every requirement of a sibling module (one of mods) names version
//     exactly, and a released module requires no unreleased sibling;
//   - every required sibling is replaced by its directory in the repository
//     (a consumer never sees the replace; it is there for development);
//   - no released module replaces anything else, since its consumers would
//     not see that replace either.
func Check(version string, mods []Module) []string {
	var problems []string
	add := func(m Module, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s/go.mod: ", m.Dir)+fmt.Sprintf(format, args...))
	}
	if major := semver.Major(version); major != "v0" && major != "v1" {
		problems = append(problems, fmt.Sprintf("%s: %s needs /%s module paths, which this check does not handle", VersionFile, version, major))
	}
	byPath := map[string]Module{}
	for _, m := range mods {
		byPath[m.Path] = m
	}
	rootPath := mods[0].Path
	for _, m := range mods {
		if want := path.Join(rootPath, m.Dir); m.Path != want {
			add(m, "module path %s, want %s so that tag %s names it", m.Path, want, m.Tag(version))
		}
		replaced := map[string]bool{} // siblings with a replace, right or wrong
		for _, r := range m.GoMod.Replace {
			sib, isSibling := byPath[r.Old.Path]
			replaced[r.Old.Path] = isSibling
			switch {
			case !isSibling:
				if m.Released() {
					add(m, "replaces %s, which consumers of %s would not see", r.Old.Path, m.Path)
				}
			case r.New.Version != "":
				add(m, "replaces sibling %s by %s@%s, want its directory", r.Old.Path, r.New.Path, r.New.Version)
			case !isLocalPath(r.New.Path):
				add(m, "replaces sibling %s by %s, want a relative directory", r.Old.Path, r.New.Path)
			default:
				got := path.Clean(path.Join(m.Dir, r.New.Path))
				if got != sib.Dir {
					add(m, "replaces sibling %s by %s, which is %s, want %s", r.Old.Path, r.New.Path, got, sib.Dir)
				}
			}
		}
		for _, r := range m.GoMod.Require {
			sib, isSibling := byPath[r.Mod.Path]
			if !isSibling {
				continue
			}
			if r.Mod.Version != version {
				add(m, "requires %s %s, want %s (the version in %s)", r.Mod.Path, r.Mod.Version, version, VersionFile)
			}
			if m.Released() && !sib.Released() {
				add(m, "requires %s, which is not released", r.Mod.Path)
			}
			if !replaced[r.Mod.Path] {
				add(m, "requires %s but does not replace it by its directory (replace %s => %s)",
					r.Mod.Path, r.Mod.Path, relPath(m.Dir, sib.Dir))
			}
		}
	}
	return problems
}

// isLocalPath reports whether a replacement is a relative directory, as
// the go command reads it.
func isLocalPath(p string) bool {
	return p == "." || p == ".." || strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../")
}

// relPath returns the directory of module dir to as seen from module dir
// from, written as in a replace directive: "../", "../k8s", "./k8s".
func relPath(from, to string) string {
	p, err := filepath.Rel(filepath.FromSlash(from), filepath.FromSlash(to))
	if err != nil {
		return to
	}
	p = filepath.ToSlash(p)
	switch {
	case p == "..", strings.HasSuffix(p, "/.."):
		return p + "/"
	case !strings.HasPrefix(p, ".."):
		return "./" + p
	}
	return p
}
