// Command release-check checks that the repository's modules are ready to
// be released at the version recorded in the VERSION file, and prints the
// Git tags that release them. It changes nothing, unless given -set: see
// RELEASING.md at the repository root for the steps.
//
// Usage (`make release-check` runs it):
//
//	go run ./cmd/release-check [-root DIR] [-set vX.Y.Z]
//
// -set first records vX.Y.Z in VERSION and makes every requirement of a
// sibling module name it (go.mod files rewritten in place).
//
// -root is the repository root (default: the parent of the directory
// holding the nearest go.mod that has a VERSION file beside it, found from
// the working directory upwards). The exit status is 1 when a module is not
// ready, with one line per problem on stderr.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fanout-go/fanout/internal/release"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release-check:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("release-check", flag.ContinueOnError)
	root := fs.String("root", "", "repository root (default: found from the working directory upwards)")
	set := fs.String("set", "", "record `VERSION` in the VERSION file and in every sibling requirement first")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		*root = r
	}
	if *set != "" {
		mods, err := release.Modules(*root)
		if err != nil {
			return err
		}
		if err := release.SetVersion(*root, *set, mods); err != nil {
			return err
		}
	}
	version, err := release.ReadVersion(*root)
	if err != nil {
		return err
	}
	mods, err := release.Modules(*root)
	if err != nil {
		return err
	}
	if problems := release.Check(version, mods); len(problems) > 0 {
		return fmt.Errorf("not ready to release %s:\n  %s", version, strings.Join(problems, "\n  "))
	}
	var tags []string
	fmt.Fprintf(out, "Every sibling requirement names %s (from %s); replace directives point at the repository's directories.\n\n", version, release.VersionFile)
	fmt.Fprintln(out, "Modules released:")
	for _, m := range mods {
		if m.Released() {
			fmt.Fprintf(out, "  %-45s tag %s\n", m.Path, m.Tag(version))
			tags = append(tags, m.Tag(version))
		}
	}
	fmt.Fprintln(out, "Not released (under an internal/ directory):")
	for _, m := range mods {
		if !m.Released() {
			fmt.Fprintf(out, "  %s\n", m.Path)
		}
	}
	fmt.Fprintf(out, "\nOn the release commit of main (see RELEASING.md):\n\n")
	for _, t := range tags {
		fmt.Fprintf(out, "  git tag -a %s -m %q\n", t, "fanout "+version)
	}
	fmt.Fprintf(out, "  git push origin %s\n", strings.Join(tags, " "))
	return nil
}

// findRoot walks up from the working directory to the first directory
// holding both a go.mod and a VERSION file.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isFile(filepath.Join(dir, "go.mod")) && isFile(filepath.Join(dir, release.VersionFile)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no directory with go.mod and " + release.VersionFile + " above the working directory; use -root")
		}
		dir = parent
	}
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
