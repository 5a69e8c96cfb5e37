// Package apitest holds the test support shared by the record and events
// packages: a check that a package declares every exported name of the
// client-go package it mirrors, one that its struct types have client-go's
// methods and fields ([SameShape]), and fakes of client-go's two EventSink
// interfaces ([CoreSink], [EventsSink]) built on one recording [Sink].
package apitest

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Exported returns the exported top-level names, and Type.Method for the
// methods of exported types, declared in the Go files of the package in dir
// that build for this platform (go/build's choice: no test files, and build
// constraints applied).
func Exported(dir string) (map[string]bool, error) {
	pkg, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			addDecl(names, d)
		}
	}
	return names, nil
}

func addDecl(names map[string]bool, d ast.Decl) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return
		}
		if d.Recv == nil {
			names[d.Name.Name] = true
			return
		}
		typ := d.Recv.List[0].Type
		if s, ok := typ.(*ast.StarExpr); ok {
			typ = s.X
		}
		if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
			names[id.Name+"."+d.Name.Name] = true
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					names[s.Name.Name] = true
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names[n.Name] = true
					}
				}
			}
		}
	}
}

// SameNames fails t for each exported name of the package at import path
// clientGo (resolved with go list) that dir does not declare. The methods
// of types in aliases are not looked for: an alias has its target's
// methods.
func SameNames(t *testing.T, clientGo, dir string, aliases []string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", clientGo).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", clientGo, err)
	}
	theirs, err := Exported(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	if len(theirs) == 0 {
		t.Fatalf("no exported names found in %s", clientGo)
	}
	ours, err := Exported(dir)
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{}
	for _, a := range aliases {
		skip[a] = true
	}
	for name := range theirs {
		if typ, _, isMethod := strings.Cut(name, "."); isMethod && skip[typ] {
			continue
		}
		if !ours[name] {
			t.Errorf("%s: missing %s", clientGo, name)
		}
	}
}
