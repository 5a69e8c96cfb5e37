package exporter

import (
	"go.yaml.in/yaml/v3"
)

// This file holds what the hand-written walks of the configuration's YAML
// nodes share (the layout, labels and annotations conditions, the
// top-level keys): following aliases without looping on a cycle.

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

// pairs returns the keys and values of mapping m.
func (w *nodeWalk) pairs(m *yaml.Node) ([]nodePair, error) {
	out := make([]nodePair, 0, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		out = append(out, nodePair{m.Content[i], m.Content[i+1]})
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

// mappingPairs returns the keys and values of mapping m, or nil if m is
// nil or not a mapping.
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
