package release

import (
	"bytes"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fence is one fenced code block of a Markdown file.
type fence struct {
	lang    string // the info string: "go", "sh", ...
	section string // the last "## " heading before it
	line    int    // line of the opening fence, 1-based
	code    string
}

// fences returns the fenced code blocks of a Markdown document.
func fences(md string) []fence {
	var out []fence
	var cur *fence
	section := ""
	for i, l := range strings.Split(md, "\n") {
		switch {
		case cur != nil && strings.HasPrefix(l, "```"):
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += l + "\n"
		case strings.HasPrefix(l, "```"):
			cur = &fence{lang: strings.TrimSpace(strings.TrimPrefix(l, "```")), section: section, line: i + 1}
		case strings.HasPrefix(l, "## "):
			section = strings.TrimSpace(strings.TrimPrefix(l, "## "))
		}
	}
	return out
}

// quickStart returns the Go block of the README's "Quick start" section.
func quickStart(t *testing.T) string {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fences(string(md)) {
		if f.lang == "go" && f.section == "Quick start" {
			return f.code
		}
	}
	t.Fatal(`README.md has no go block under "## Quick start"`)
	return ""
}

// markdownFiles returns the repository's tracked Markdown files that this
// test reads: README.md and the READMEs of the modules.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	mods, err := Modules(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, m := range mods {
		p := filepath.Join(repoRoot, filepath.FromSlash(m.Dir), "README.md")
		if _, err := os.Stat(p); err == nil {
			files = append(files, p)
		}
	}
	return files
}

// Every Go block of the READMEs is gofmt-formatted (go/format accepts a
// partial file: declarations or statements), so that a user who pastes it
// gets formatted code.
func TestReadmeGoBlocksAreGofmtClean(t *testing.T) {
	n := 0
	for _, file := range markdownFiles(t) {
		md, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fences(string(md)) {
			if f.lang != "go" {
				continue
			}
			n++
			got, err := format.Source([]byte(f.code))
			if err != nil {
				t.Errorf("%s:%d: go block does not parse: %v", file, f.line, err)
				continue
			}
			if !bytes.Equal(got, []byte(f.code)) {
				t.Errorf("%s:%d: go block is not gofmt-formatted; gofmt makes it:\n%s", file, f.line, got)
			}
		}
	}
	if n == 0 {
		t.Fatal("no go blocks found: the check proves nothing")
	}
}

// goGet is a `go get` line of the README: the line, the module path (any
// @version cut) and what follows the argument (its comment).
type goGet struct{ line, path, rest string }

var goGetLine = regexp.MustCompile(`(?m)^go get (\S+)(.*)$`)

// readmeGoGets returns the README's go get lines and the repository's
// modules by path; it fails t if there is no such line.
func readmeGoGets(t *testing.T) ([]goGet, map[string]Module) {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	mods, err := Modules(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]Module{}
	for _, m := range mods {
		byPath[m.Path] = m
	}
	var gets []goGet
	for _, l := range goGetLine.FindAllStringSubmatch(string(md), -1) {
		path, _, _ := strings.Cut(l[1], "@")
		gets = append(gets, goGet{line: l[0], path: path, rest: l[2]})
	}
	if len(gets) == 0 {
		t.Fatal("README.md has no go get line")
	}
	return gets, byPath
}

// Every module the README tells users to `go get` is a released module of
// this repository.
func TestReadmeInstallLinesNameReleasedModules(t *testing.T) {
	gets, mods := readmeGoGets(t)
	for _, g := range gets {
		if m, ok := mods[g.path]; !ok || !m.Released() {
			t.Errorf("README.md: %s: not a released module of this repository", g.line)
		}
	}
}

var goInstallLine = regexp.MustCompile(`(?m)go install (\S+)@\S+`)

// A README that tells users to `go install pkg@version` names a package of
// a released module without replace directives: go install refuses a
// versioned module whose go.mod has them, and the nested modules keep
// theirs (RELEASING.md). The README told users to go install the exporter.
func TestReadmeInstallsNoCommandOfAModuleWithReplaceDirectives(t *testing.T) {
	mods, err := Modules(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		md, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(m.Dir), "README.md"))
		if err != nil {
			continue // a module without a README
		}
		for _, l := range goInstallLine.FindAllStringSubmatch(string(md), -1) {
			for _, o := range mods {
				if (l[1] == o.Path || strings.HasPrefix(l[1], o.Path+"/")) && len(o.GoMod.Replace) > 0 && !deeper(mods, o, l[1]) {
					t.Errorf("%s/README.md: go install %s: module %s has replace directives", m.Dir, l[1], o.Path)
				}
			}
		}
	}
}

// deeper reports whether a module nested in o, rather than o, holds pkg.
func deeper(mods []Module, o Module, pkg string) bool {
	for _, n := range mods {
		if len(n.Path) > len(o.Path) && (pkg == n.Path || strings.HasPrefix(pkg, n.Path+"/")) {
			return true
		}
	}
	return false
}

// Every `go get` line of the README says which Go the module needs, as
// its go.mod's go directive does: a user on the core's Go 1.25 must learn
// from the install line, not from the go command, that a module needs
// Go 1.26.
func TestReadmeInstallLinesStateTheGoVersionEachModuleNeeds(t *testing.T) {
	gets, mods := readmeGoGets(t)
	for _, g := range gets {
		m, ok := mods[g.path]
		if !ok || m.GoMod.Go == nil {
			continue // TestReadmeInstallLinesNameReleasedModules reports it
		}
		v := m.GoMod.Go.Version
		if parts := strings.SplitN(v, ".", 3); len(parts) == 3 {
			v = parts[0] + "." + parts[1] // 1.26.0 → 1.26
		}
		if want := "Go " + v + " or later"; !strings.Contains(g.rest, want) {
			t.Errorf("README.md: the line does not say %q (its go.mod: go %s):\n%s", want, m.GoMod.Go.Version, g.line)
		}
	}
}
