package release

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// WriteProxy writes the released modules among mods, found under root, as
// version into dir in the layout of a module proxy (the GOPROXY protocol,
// served with GOPROXY=file://dir): for each module path,
// <path>/@v/list, <version>.info, <version>.mod (its go.mod as it is: a
// consumer ignores its replace directives) and <version>.zip, made by
// [zip.CreateFromDir], which applies the module zip rules (no nested
// modules, no vendor directories, no VCS directories, size limits).
func WriteProxy(dir, root, version string, mods []Module) error {
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	ev, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	for _, m := range mods {
		if !m.Released() {
			continue
		}
		ep, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		vdir := filepath.Join(dir, filepath.FromSlash(ep), "@v")
		if err := os.MkdirAll(vdir, 0o777); err != nil {
			return err
		}
		src := filepath.Join(root, filepath.FromSlash(m.Dir))
		gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
		if err != nil {
			return err
		}
		for name, data := range map[string][]byte{
			"list":       []byte(version + "\n"),
			ev + ".info": info,
			ev + ".mod":  gomod,
		} {
			if err := os.WriteFile(filepath.Join(vdir, name), data, 0o666); err != nil {
				return err
			}
		}
		if err := writeZip(filepath.Join(vdir, ev+".zip"), module.Version{Path: m.Path, Version: version}, src); err != nil {
			return err
		}
	}
	return nil
}

func writeZip(file string, mv module.Version, src string) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return zip.CreateFromDir(f, mv, src)
}
