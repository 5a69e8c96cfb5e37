package exporter

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	goccy "github.com/goccy/go-yaml"
	goccyparser "github.com/goccy/go-yaml/parser"
	"go.yaml.in/yaml/v3"
)

// This file holds the checks of a configuration's YAML document before it
// is decoded: where a syntax error is, unquoted templates, and how far
// aliases expand the document.

// parseYAML parses data into a node tree. On a syntax error, it returns
// one "line N: ..." message naming where the text goes wrong: yaml.v3
// names the line of the enclosing block (an indentation error under a
// receiver is reported at the receivers: key), so the error is located
// with goccy/go-yaml's parser (kubernetes-event-exporter's YAML library),
// which points at the offending token; yaml.v3's own message is kept
// when goccy finds no error.
//
// A backslash in double quotes before a character YAML does not escape
// (\w, \d, \. in a regular expression) is an error in YAML 1.2, but
// kubernetes-event-exporter's parser (goccy/go-yaml v1.11) keeps it as
// written: parseYAML does too, escaping each such backslash, with a
// warning per line.
func parseYAML(data []byte) (*yaml.Node, []string, error) {
	var warnings []string
	for range maxKeptEscapes {
		var root yaml.Node
		err := yaml.Unmarshal(data, &root)
		if err == nil {
			return &root, warnings, nil
		}
		var ge goccy.Error
		if _, perr := goccyparser.ParseBytes(data, 0); errors.As(perr, &ge) && ge.GetToken() != nil {
			pos := ge.GetToken().Position
			if kept, ch, ok := keepEscape(data, ge.GetMessage(), pos.Line, pos.Column); ok {
				data = kept
				warnings = append(warnings, fmt.Sprintf(`line %d: \%c in double quotes kept as written, as `+
					`kubernetes-event-exporter does (YAML 1.2 refuses it: write \\%c, or use single quotes)`, pos.Line, ch, ch))
				continue
			}
			return nil, nil, fmt.Errorf("line %d: %s (column %d)", pos.Line, ge.GetMessage(), pos.Column)
		}
		return nil, nil, errors.New(trimYAMLPrefix(err.Error()))
	}
	return nil, nil, fmt.Errorf("more than %d unknown escapes in double quotes", maxKeptEscapes)
}

// maxKeptEscapes bounds the backslashes parseYAML keeps as written.
const maxKeptEscapes = 256

// keepEscape returns data with the backslash before column col of line
// (both from 1, the column of the character after it) doubled, and that
// character, if msg is the parser's "unknown escape character" and that
// backslash is there.
func keepEscape(data []byte, msg string, line, col int) ([]byte, rune, bool) {
	if !strings.HasPrefix(msg, "found unknown escape character") || line < 1 || col < 2 {
		return nil, 0, false
	}
	start := 0
	for range line - 1 {
		i := bytes.IndexByte(data[start:], '\n')
		if i < 0 {
			return nil, 0, false
		}
		start += i + 1
	}
	end := len(data)
	if i := bytes.IndexByte(data[start:], '\n'); i >= 0 {
		end = start + i
	}
	text := []rune(string(data[start:end]))
	if col-1 >= len(text) || text[col-2] != '\\' {
		return nil, 0, false
	}
	at := start + len(string(text[:col-2]))
	out := make([]byte, 0, len(data)+1)
	out = append(append(append(out, data[:at]...), '\\'), data[at:]...)
	return out, text[col-1], true
}

// trimYAMLPrefix removes yaml.v3's "yaml: " prefix from a message.
func trimYAMLPrefix(s string) string {
	const prefix = "yaml: "
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}

// maxAliasExpansion is the most values aliases may add to a document once
// expanded. A configuration that reuses a layout or a rule through
// anchors adds hundreds; a "billion laughs" document of a few hundred
// bytes adds millions, and compiling that many templates takes gigabytes.
const maxAliasExpansion = 10_000

// complexKeyProblems returns a problem for every mapping key of the
// document that is a map or a list: an unquoted template (YAML reads
// msg: {{ .Message }} as a map keyed by a map), which
// kubernetes-event-exporter refuses too.
func complexKeyProblems(root *yaml.Node) []string {
	var p []string
	complexKeys(root, &p)
	return p
}

// complexKeys appends a problem for every mapping key of tree n that is a
// map or a list. Aliases are not followed: their targets are in the tree.
func complexKeys(n *yaml.Node, p *[]string) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			switch {
			case k.Kind == yaml.MappingNode && k.Style&yaml.FlowStyle != 0:
				*p = append(*p, fmt.Sprintf("line %d: a template must be quoted: YAML reads {{ ... }} as a map, "+
					`not text (write "{{ .Message }}" in quotes, as kubernetes-event-exporter requires)`, k.Line))
			case k.Kind == yaml.MappingNode || k.Kind == yaml.SequenceNode:
				*p = append(*p, fmt.Sprintf("line %d: a key that is a map or a list is not supported", k.Line))
			}
		}
	}
	for _, c := range n.Content {
		complexKeys(c, p)
	}
}

// aliasExpansionProblem returns a problem naming the line of the alias
// that expands the document beyond maxAliasExpansion values, or "". It
// counts each node's expanded size once (memoized), so that it takes time
// proportional to the document, not to its expansion.
func aliasExpansionProblem(root *yaml.Node) string {
	x := expansion{size: map[*yaml.Node]int{}}
	own := countNodes(root)
	if total := x.expandedSize(root); total-own > maxAliasExpansion {
		return fmt.Sprintf("line %d: aliases expand the document to more than %d values (%d through aliases, "+
			"at most %d allowed): refused, as an alias bomb would exhaust memory", x.worst.Line, min(total, expansionCap)-1,
			min(total, expansionCap)-own, maxAliasExpansion)
	}
	return ""
}

// expansionCap bounds the sizes expansion computes, so that a document
// nested aliases deep cannot overflow them.
const expansionCap = 1 << 40

// expansion computes the expanded sizes of a node tree's nodes.
type expansion struct {
	size  map[*yaml.Node]int // expanded size by node; -1 while being computed
	worst *yaml.Node         // the alias of the largest expansion
	most  int
}

// expandedSize returns the number of nodes n stands for, aliases
// expanded (an alias counts as its target's size; a cycle as 1: the
// decoder reports it).
func (x *expansion) expandedSize(n *yaml.Node) int {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return 1
		}
		s := x.expandedSize(n.Alias)
		if s > x.most {
			x.worst, x.most = n, s
		}
		return s
	}
	switch s, ok := x.size[n]; {
	case ok && s < 0:
		return 1 // a cycle
	case ok:
		return s
	}
	x.size[n] = -1
	total := 1
	for _, c := range n.Content {
		total = min(total+x.expandedSize(c), expansionCap)
	}
	x.size[n] = total
	return total
}

// countNodes returns the number of nodes of tree n, aliases counted as
// one node each.
func countNodes(n *yaml.Node) int {
	total := 1
	for _, c := range n.Content {
		total += countNodes(c)
	}
	return total
}
