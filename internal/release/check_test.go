package release

import (
	"strings"
	"testing"
)

// This repository is ready to release at the version in VERSION.
func TestThisRepositoryIsReadyToRelease(t *testing.T) {
	version, err := ReadVersion(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	mods, err := Modules(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Check(version, mods) {
		t.Error(p)
	}
}

func TestCheckFindsWhatBreaksARelease(t *testing.T) {
	const good = `module example.com/r/a

require example.com/r v0.2.0

replace example.com/r => ../
`
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // a substring of the one problem expected; "" for none
	}{
		{"ready", map[string]string{"a/go.mod": good}, ""},
		{"replace written ../..", map[string]string{"a/go.mod": strings.Replace(good, "=> ../", "=> ./..", 1)}, ""},
		{"placeholder version", map[string]string{
			"a/go.mod": strings.Replace(good, "v0.2.0", "v0.0.0-00010101000000-000000000000", 1)},
			"requires example.com/r v0.0.0-00010101000000-000000000000, want v0.2.0"},
		{"no replace", map[string]string{"a/go.mod": strings.Replace(good, "replace example.com/r => ../\n", "", 1)},
			"does not replace it by its directory (replace example.com/r => ../)"},
		{"replace by the wrong directory", map[string]string{"a/go.mod": strings.Replace(good, "=> ../", "=> ../b", 1)},
			"replaces sibling example.com/r by ../b, which is b, want ."},
		{"replace by a version", map[string]string{"a/go.mod": strings.Replace(good, "=> ../", "=> example.com/fork v1.0.0", 1)},
			"replaces sibling example.com/r by example.com/fork@v1.0.0"},
		{"third-party replace in a released module", map[string]string{"a/go.mod": good + "replace example.com/other => ../other\n"},
			"replaces example.com/other, which consumers of example.com/r/a would not see"},
		{"module path off its directory", map[string]string{"a/go.mod": strings.Replace(good, "module example.com/r/a", "module example.com/r/x", 1)},
			"module path example.com/r/x, want example.com/r/a"},
		{"released requires unreleased", map[string]string{
			"a/go.mod":          good + "require example.com/r/internal/t v0.2.0\nreplace example.com/r/internal/t => ../internal/t\n",
			"internal/t/go.mod": "module example.com/r/internal/t\n"},
			"requires example.com/r/internal/t, which is not released"},
		{"unreleased module may replace anything", map[string]string{
			"internal/t/go.mod": "module example.com/r/internal/t\nreplace example.com/other => ../other\n"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"go.mod": "module example.com/r\n"}
			for k, v := range tc.files {
				files[k] = v
			}
			mods, err := Modules(writeTree(t, files))
			if err != nil {
				t.Fatal(err)
			}
			problems := Check("v0.2.0", mods)
			switch {
			case tc.want == "" && len(problems) > 0:
				t.Errorf("problems %q, want none", problems)
			case tc.want != "" && (len(problems) != 1 || !strings.Contains(problems[0], tc.want)):
				t.Errorf("problems %q, want one containing %q", problems, tc.want)
			}
		})
	}
}
