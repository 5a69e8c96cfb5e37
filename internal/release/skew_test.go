package release

import (
	"strings"
	"testing"
)

// Every module but the root requires each third-party module at one
// version, so that make test compiles each dependency once.
func TestThisRepositoryHasNoDependencySkew(t *testing.T) {
	mods, err := Modules(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Skew(mods) {
		t.Error(p)
	}
}

func TestSkewNamesEachVersionAndTheModulesAtIt(t *testing.T) {
	files := map[string]string{
		"go.mod":   "module example.com/r\nrequire golang.org/x/net v0.1.0\n",
		"a/go.mod": "module example.com/r/a\nrequire (\n\tgolang.org/x/net v0.3.0\n\tgolang.org/x/sys v0.5.0 // indirect\n\texample.com/r v0.2.0\n)\n",
		"b/go.mod": "module example.com/r/b\nrequire (\n\tgolang.org/x/net v0.10.0\n\tgolang.org/x/sys v0.5.0\n\texample.com/r v0.1.0\n)\n",
		"c/go.mod": "module example.com/r/c\nrequire golang.org/x/net v0.3.0\n",
	}
	mods, err := Modules(writeTree(t, files))
	if err != nil {
		t.Fatal(err)
	}
	got := Skew(mods)
	want := "golang.org/x/net at 2 versions (v0.3.0 in a, c; v0.10.0 in b): require v0.10.0 everywhere"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("Skew = %q, want only %q (the root's v0.1.0, the siblings and x/sys at one version are no skew)",
			strings.Join(got, "\n"), want)
	}
}
