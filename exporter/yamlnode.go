package exporter

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file holds what the hand-written walks of the configuration's YAML
// nodes share (the layout, labels and annotations conditions, the
// top-level keys): following aliases without looping on a cycle, and
// YAML 1.1 merge keys (<<), which both YAML libraries of
// kubernetes-event-exporter apply.

// maxYAMLDepth bounds how deep a walk goes, aliases followed; maxYAMLNodes
// how many nodes it visits, so that aliases of aliases cannot make it
// expand a small document into an enormous one.
const (
	maxYAMLDepth = 100
	maxYAMLNodes = 100_000
)

// nodeWalk is the state of one walk of a node tree that follows aliases:
// the nodes being walked (an alias to one of them is a cycle), and how
// many were visited.
type nodeWalk struct {
	path  []*yaml.Node
	nodes int
}

// enter returns the node n stands for (the target of an alias, n
// otherwise) and pushes it on the walk's path; the caller calls leave once
// done with it. It returns a configuration error, with n's line, for an
// alias to a node being walked (a cycle), a walk deeper than maxYAMLDepth
// or longer than maxYAMLNodes.
func (w *nodeWalk) enter(n *yaml.Node) (*yaml.Node, error) {
	target := resolveAlias(n)
	for _, p := range w.path {
		if p == target {
			return nil, lineError(n, "alias *%s refers to a node that contains it (a cycle)", n.Value)
		}
	}
	w.nodes++
	switch {
	case len(w.path) >= maxYAMLDepth:
		return nil, lineError(n, "nested more than %d levels deep", maxYAMLDepth)
	case w.nodes > maxYAMLNodes:
		return nil, lineError(n, "more than %d values (aliases expanded)", maxYAMLNodes)
	}
	w.path = append(w.path, target)
	return target, nil
}

// leave pops the node enter pushed last.
func (w *nodeWalk) leave() { w.path = w.path[:len(w.path)-1] }

// nodePair is a key of a mapping and its value.
type nodePair struct{ key, value *yaml.Node }

// isMergeKey reports whether k is the merge key: a plain "<<".
func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge"
}

// pairs returns the keys and values of mapping m (entered), with YAML
// 1.1's merge keys applied: the value of << is a mapping or a sequence of
// mappings (or aliases of them), whose pairs are added unless a key of m
// is the same; a mapping earlier in the sequence wins over a later one.
// m's own keys come first, in order, then the merged ones.
func (w *nodeWalk) pairs(m *yaml.Node) ([]nodePair, error) {
	var out, merges []nodePair
	for i := 0; i+1 < len(m.Content); i += 2 {
		p := nodePair{m.Content[i], m.Content[i+1]}
		if isMergeKey(p.key) {
			merges = append(merges, p)
			continue
		}
		out = append(out, p)
	}
	if len(merges) == 0 {
		return out, nil
	}
	seen := make(map[string]bool, len(out))
	for _, p := range out {
		seen[p.key.Value] = true
	}
	for _, mp := range merges {
		var err error
		if out, err = w.merge(mp.value, out, seen); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// merge appends to out the pairs of the value v of a merge key whose keys
// are not in seen, adding them to seen.
func (w *nodeWalk) merge(v *yaml.Node, out []nodePair, seen map[string]bool) ([]nodePair, error) {
	sources := []*yaml.Node{v}
	if src := resolveAlias(v); src.Kind == yaml.SequenceNode {
		if _, err := w.enter(v); err != nil {
			return nil, err
		}
		defer w.leave()
		sources = src.Content
	}
	for _, s := range sources {
		var err error
		if out, err = w.mergeOne(s, out, seen); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// resolveAlias returns the node n stands for: the target of an alias
// (of an alias...), n otherwise.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// mergeOne appends to out the pairs of mapping s (or an alias of one)
// whose keys are not in seen.
func (w *nodeWalk) mergeOne(s *yaml.Node, out []nodePair, seen map[string]bool) ([]nodePair, error) {
	m, err := w.enter(s)
	if err != nil {
		return nil, err
	}
	defer w.leave()
	if m.Kind != yaml.MappingNode {
		return nil, lineError(s, "merge key <<: expected a map or a list of maps")
	}
	ps, err := w.pairs(m)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if !seen[p.key.Value] {
			seen[p.key.Value] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// mappingPairs returns the keys and values of mapping m with merge keys
// applied (see [nodeWalk.pairs]), or nil if m is nil, not a mapping or
// its merges are invalid (for the walks that only look: the decoder
// reports those).
func mappingPairs(m *yaml.Node) []nodePair {
	if m == nil {
		return nil
	}
	var w nodeWalk
	m, err := w.enter(m)
	if err != nil || m.Kind != yaml.MappingNode {
		return nil
	}
	ps, _ := w.pairs(m)
	return ps
}

// dedupeKeys removes from every mapping of the tree n the pairs whose key
// comes again later in the same mapping, so that the last value wins, as
// in kubernetes-event-exporter's YAML libraries (yaml.v3 refuses such a
// mapping when decoding). It returns a warning for each pair removed,
// naming the key and both lines. Aliases are not followed: the node they
// refer to is in the tree.
func dedupeKeys(n *yaml.Node) []string {
	var warnings []string
	if n.Kind == yaml.MappingNode {
		n.Content, warnings = dedupePairs(n.Content)
	}
	for _, c := range n.Content {
		warnings = append(warnings, dedupeKeys(c)...)
	}
	return warnings
}

// dedupePairs returns the pairs of a mapping's content without those
// whose key comes again later (same kind and value, as yaml.v3 compares
// them), and a warning for each of those.
func dedupePairs(content []*yaml.Node) ([]*yaml.Node, []string) {
	type key struct {
		kind  yaml.Kind
		value string
	}
	last := make(map[key]int, len(content)/2)
	for i := 0; i+1 < len(content); i += 2 {
		last[key{content[i].Kind, content[i].Value}] = i
	}
	if len(last) == len(content)/2 {
		return content, nil
	}
	var warnings []string
	out := make([]*yaml.Node, 0, 2*len(last))
	for i := 0; i+1 < len(content); i += 2 {
		k := content[i]
		if j := last[key{k.Kind, k.Value}]; j != i {
			warnings = append(warnings, fmt.Sprintf("line %d: key %q is set again at line %d: the last value is used "+
				"(as kubernetes-event-exporter does)", k.Line, k.Value, content[j].Line))
			continue
		}
		out = append(out, k, content[i+1])
	}
	return out, warnings
}

// unmarshalerType is yaml.Unmarshaler's type.
var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// unknownFields returns a warning for each key of the tree n that no field
// of t, the type n decodes into, takes, as yaml.v3's KnownFields would
// report it (its decoder cannot check a node tree): values decoded by an
// UnmarshalYAML method are not looked into. kubernetes-event-exporter
// ignores keys it does not know, so they are ignored here too, with their
// line.
func unknownFields(n *yaml.Node, t reflect.Type, w *nodeWalk) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	n, err := w.enter(n)
	if err != nil {
		return nil // the decoder reports it
	}
	defer w.leave()
	var warnings []string
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := yamlFields(t, map[string]reflect.Type{})
		pairs, _ := w.pairs(n)
		for _, p := range pairs {
			ft, ok := fields[p.key.Value]
			if !ok {
				warnings = append(warnings, fmt.Sprintf("line %d: unknown field %s: ignored "+
					"(kubernetes-event-exporter ignores unknown keys too)%s", p.key.Line, p.key.Value,
					didYouMean(p.key.Value, fields)))
				continue
			}
			warnings = append(warnings, unknownFields(p.value, ft, w)...)
		}
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
		for _, item := range n.Content {
			warnings = append(warnings, unknownFields(item, t.Elem(), w)...)
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		pairs, _ := w.pairs(n)
		for _, p := range pairs {
			warnings = append(warnings, unknownFields(p.value, t.Elem(), w)...)
		}
	}
	return warnings
}

// yamlFields adds to fields the keys struct type t decodes, as yaml.v3
// names them (the tag's name, else the field's name in lower case; inline
// structs' keys), each with its field's type, and returns fields.
func yamlFields(t reflect.Type, fields map[string]reflect.Type) map[string]reflect.Type {
	for f := range t.Fields() {
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if slices.Contains(strings.Split(opts, ","), "inline") && f.Type.Kind() == reflect.Struct {
			yamlFields(f.Type, fields)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
	}
	return fields
}

// didYouMean returns "; did you mean K?" for the field K of fields
// closest to key (at most two edits away, case aside), or "".
func didYouMean[V any](key string, fields map[string]V) string {
	best, dist := "", 3
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		if d := editDistance(strings.ToLower(key), strings.ToLower(f)); d < dist {
			best, dist = f, d
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean " + best + "?"
}

// editDistance returns the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
