package apitest

import (
	"reflect"
	"testing"
)

// SameShape fails t unless a program written against client-go's struct
// type theirs compiles against ours: every method of *theirs (promoted
// ones included) exists on *ours with the same parameters and results; when
// all of theirs's fields are exported, ours has exactly those fields in
// that order (so that an unkeyed literal compiles, and vet's copylocks
// check sees the same); otherwise ours has at least its exported fields,
// with the same types.
func SameShape(t *testing.T, theirs, ours reflect.Type) {
	t.Helper()
	tp, op := reflect.PointerTo(theirs), reflect.PointerTo(ours)
	for i := range tp.NumMethod() {
		m := tp.Method(i)
		om, ok := op.MethodByName(m.Name)
		if !ok {
			t.Errorf("%s: method %s of %s is missing", name(ours), m.Name, name(theirs))
			continue
		}
		if got, want := signature(om.Type), signature(m.Type); got != want {
			t.Errorf("%s.%s: got %s, client-go has %s", name(ours), m.Name, got, want)
		}
	}
	all := true
	for i := range theirs.NumField() {
		all = all && theirs.Field(i).IsExported()
	}
	if all && ours.NumField() != theirs.NumField() {
		t.Errorf("%s has %d fields, client-go's %d: an unkeyed literal would not compile", name(ours), ours.NumField(), theirs.NumField())
	}
	for i := range theirs.NumField() {
		f := theirs.Field(i)
		if !f.IsExported() {
			continue
		}
		of, ok := ours.FieldByName(f.Name)
		switch {
		case !ok:
			t.Errorf("%s: field %s of %s is missing", name(ours), f.Name, name(theirs))
		case of.Type != f.Type || of.Anonymous != f.Anonymous:
			t.Errorf("%s.%s: got %v, client-go has %v", name(ours), f.Name, of.Type, f.Type)
		case all && of.Index[0] != i:
			t.Errorf("%s.%s is field %d, client-go's is %d", name(ours), f.Name, of.Index[0], i)
		}
	}
}

// signature prints a method's parameters (receiver left out) and results.
func signature(m reflect.Type) string {
	s := "("
	for i := 1; i < m.NumIn(); i++ {
		s += m.In(i).String() + ","
	}
	s += ")("
	for i := range m.NumOut() {
		s += m.Out(i).String() + ","
	}
	return s + ")"
}

// name is t's package path and name.
func name(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }
