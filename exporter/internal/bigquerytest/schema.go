package bigquerytest

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Field is a column of a table's schema, as the API shows it.
type Field struct {
	Name   string  `json:"name"`
	Type   string  `json:"type"`           // STRING, TIMESTAMP, INTEGER, FLOAT, BOOLEAN or RECORD
	Mode   string  `json:"mode,omitempty"` // NULLABLE or REPEATED
	Fields []Field `json:"fields,omitempty"`
}

// detect returns the field of value v named name, as schema autodetection
// makes it; ok is false for a value it cannot type (null, an empty list).
func detect(name string, v any) (f Field, ok bool) {
	f = Field{Name: name, Mode: "NULLABLE"}
	switch v := v.(type) {
	case string:
		f.Type = "STRING"
		if _, err := time.Parse(time.RFC3339Nano, v); err == nil {
			f.Type = "TIMESTAMP"
		}
	case json.Number:
		f.Type = "FLOAT"
		if _, err := v.Int64(); err == nil {
			f.Type = "INTEGER"
		}
	case bool:
		f.Type = "BOOLEAN"
	case map[string]any:
		f.Type = "RECORD"
		for _, k := range sortedKeys(v) {
			if sub, ok := detect(k, v[k]); ok {
				f.Fields = append(f.Fields, sub)
			}
		}
	case []any:
		if len(v) == 0 {
			return f, false
		}
		elem, ok := detect(name, v[0])
		elem.Mode = "REPEATED"
		return elem, ok
	default:
		return f, false
	}
	return f, true
}

// merge adds to fields those of add it lacks (nested too); a field whose
// type differs is an error.
func merge(fields, add []Field, path string) ([]Field, error) {
	for _, a := range add {
		i := slices.IndexFunc(fields, func(f Field) bool { return f.Name == a.Name })
		if i < 0 {
			fields = append(fields, a)
			continue
		}
		f := &fields[i]
		if f.Type != a.Type && !(f.Type == "FLOAT" && a.Type == "INTEGER") {
			return nil, fmt.Errorf("Field %s%s has changed type from %s to %s", path, a.Name, f.Type, a.Type)
		}
		if f.Type == "RECORD" {
			sub, err := merge(f.Fields, a.Fields, path+a.Name+".")
			if err != nil {
				return nil, err
			}
			f.Fields = sub
		}
	}
	return fields, nil
}

// check returns the location and message of the first value of row that
// the schema does not take, or "" if it takes them all.
func check(fields []Field, row map[string]any, path string) (location, message string) {
	for _, k := range sortedKeys(row) {
		i := slices.IndexFunc(fields, func(f Field) bool { return f.Name == k })
		if i < 0 {
			return path + k, fmt.Sprintf("no such field: %s%s.", path, k)
		}
		if loc, msg := checkValue(fields[i], row[k], path+k); msg != "" {
			return loc, msg
		}
	}
	return "", ""
}

// checkValue checks a value of field f at location loc.
func checkValue(f Field, v any, loc string) (string, string) {
	if v == nil {
		return "", ""
	}
	if list, ok := v.([]any); ok && f.Mode == "REPEATED" {
		for _, e := range list {
			if l, m := checkValue(Field{Name: f.Name, Type: f.Type, Fields: f.Fields}, e, loc); m != "" {
				return l, m
			}
		}
		return "", ""
	}
	ok := false
	switch v := v.(type) {
	case string:
		_, err := time.Parse(time.RFC3339Nano, v)
		ok = f.Type == "STRING" || f.Type == "TIMESTAMP" && err == nil
	case json.Number:
		_, err := v.Int64()
		ok = f.Type == "FLOAT" || f.Type == "INTEGER" && err == nil || f.Type == "STRING"
	case bool:
		ok = f.Type == "BOOLEAN"
	case map[string]any:
		if f.Type == "RECORD" {
			return check(f.Fields, v, loc+".")
		}
	}
	if !ok || f.Mode == "REPEATED" {
		return loc, fmt.Sprintf("This field: %s is not a record or of type %s.", loc, f.Type)
	}
	return "", ""
}

// sortedKeys returns m's keys, sorted.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
