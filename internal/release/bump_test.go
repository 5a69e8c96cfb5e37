package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Setting a new version rewrites VERSION and every sibling requirement,
// keeps the replace directives and third-party requirements, and leaves a
// tree that Check accepts.
func TestSetVersionMovesEverySiblingRequirement(t *testing.T) {
	root := writeTree(t, map[string]string{
		"VERSION": "v0.1.0\n",
		"go.mod":  "module example.com/r\n\ngo 1.25.0\n\nrequire example.com/third v1.2.3\n",
		"a/go.mod": `module example.com/r/a

go 1.26.0

replace example.com/r => ../

require (
	example.com/r v0.1.0
	example.com/third v1.2.3
)
`,
		"a/b/go.mod": "module example.com/r/a/b\n\nreplace example.com/r => ../../\n\nreplace example.com/r/a => ../\n\nrequire example.com/r/a v0.1.0\n\nrequire example.com/r v0.1.0 // indirect\n",
	})
	mods, err := Modules(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := SetVersion(root, "v0.2.0", mods); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadVersion(root); err != nil || v != "v0.2.0" {
		t.Fatalf("VERSION = %q, %v; want v0.2.0", v, err)
	}
	mods, err = Modules(root)
	if err != nil {
		t.Fatal(err)
	}
	if problems := Check("v0.2.0", mods); len(problems) > 0 {
		t.Errorf("after SetVersion: %q", problems)
	}
	a, err := os.ReadFile(filepath.Join(root, "a", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"example.com/r v0.2.0", "example.com/third v1.2.3", "replace example.com/r => ../"} {
		if !strings.Contains(string(a), want) {
			t.Errorf("a/go.mod lacks %q:\n%s", want, a)
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "a", "b", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "example.com/r v0.2.0 // indirect") {
		t.Errorf("a/b/go.mod lost the indirect comment or the version:\n%s", b)
	}
}
