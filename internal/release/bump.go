package release

import (
	"os"
	"path/filepath"
)

// SetVersion records version in root/VERSION and makes every requirement of
// a sibling module in mods (found under root) name it, rewriting the go.mod
// files that change. Replace directives are left as they are. It does not
// validate: run [Check] on the result.
func SetVersion(root, version string, mods []Module) error {
	if err := os.WriteFile(filepath.Join(root, VersionFile), []byte(version+"\n"), 0o666); err != nil {
		return err
	}
	sibling := map[string]bool{}
	for _, m := range mods {
		sibling[m.Path] = true
	}
	for _, m := range mods {
		changed := false
		for _, r := range m.GoMod.Require {
			if sibling[r.Mod.Path] && r.Mod.Version != version {
				if err := m.GoMod.AddRequire(r.Mod.Path, version); err != nil {
					return err
				}
				changed = true
			}
		}
		if !changed {
			continue
		}
		m.GoMod.Cleanup()
		data, err := m.GoMod.Format()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod"), data, 0o666); err != nil {
			return err
		}
	}
	return nil
}
