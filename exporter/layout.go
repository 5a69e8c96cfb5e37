package exporter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"go.yaml.in/yaml/v3"
)

// Payload holds what a payload sink's records look like, as in
// kubernetes-event-exporter: a layout, and deDot.
type Payload struct {
	// Layout, if set, replaces the record by the layout with its templates
	// executed against the occurrence's [EnhancedEvent].
	Layout *Layout `yaml:"layout"`
	// DeDot replaces dots by underscores in label and annotation keys
	// (the event's and the involved object's).
	DeDot Bool `yaml:"deDot"`
}

// payload returns p: every sink configuration that embeds a Payload has
// this method, by which [Receiver.payload] finds it.
func (p *Payload) payload() *Payload { return p }

// Layout is kubernetes-event-exporter's layout: a YAML map whose strings
// are Go templates (text/template, with the sprig functions, as theirs),
// executed against the occurrence's [EnhancedEvent], so that
// "{{ .InvolvedObject.Name }}", "{{ .GetTimestampMs }}" or
// "{{ toJson .InvolvedObject.Labels }}" work as there. Maps and lists are
// walked; the result is written as JSON (a string stays a string).
// Templates are parsed when the configuration is loaded: a template that
// does not parse is a configuration error with its line.
type Layout struct {
	root     layoutNode
	warnings []string
	// theirWarnings are the warnings with compat kubernetes-event-exporter.
	theirWarnings []string
}

// layoutNode is a compiled layout value: exactly one field is set, or
// none for null.
type layoutNode struct {
	tmpl   *template.Template
	fields map[string]layoutNode
	list   []layoutNode
	value  any // a scalar that is not a string, written as it is
	line   int // the line of the template
}

// funcs are the template functions of layouts and headers.
var funcs = sprig.TxtFuncMap()

// parseTemplate parses a template with the layout functions.
func parseTemplate(text string) (*template.Template, error) {
	return template.New("layout").Funcs(funcs).Parse(text)
}

// UnmarshalYAML compiles the layout; an empty layout is no layout. An
// alias that refers to a node containing it (a cycle) is an error with
// its line, and so is a layout nested deeper than 100 levels or of more
// than 100,000 values, aliases expanded.
func (l *Layout) UnmarshalYAML(n *yaml.Node) error {
	if resolveAlias(n).Kind != yaml.MappingNode {
		return lineError(n, "layout: expected a map")
	}
	root, err := l.compile(n, &nodeWalk{})
	if err != nil {
		return err
	}
	l.root = root
	return nil
}

// compile compiles the layout value n, walked by w.
func (l *Layout) compile(n *yaml.Node, w *nodeWalk) (layoutNode, error) {
	n, err := w.enter(n)
	if err != nil {
		return layoutNode{}, layoutError(err)
	}
	defer w.leave()
	switch n.Kind {
	case yaml.MappingNode:
		return l.compileMap(n, w)
	case yaml.SequenceNode:
		list := make([]layoutNode, len(n.Content))
		for i, v := range n.Content {
			f, err := l.compile(v, w)
			if err != nil {
				return layoutNode{}, err
			}
			list[i] = f
		}
		return layoutNode{list: list}, nil
	}
	return l.compileScalar(n)
}

// compileMap compiles the layout's mapping n, walked by w.
func (l *Layout) compileMap(n *yaml.Node, w *nodeWalk) (layoutNode, error) {
	pairs, err := w.pairs(n)
	if err != nil {
		return layoutNode{}, layoutError(err)
	}
	fields := make(map[string]layoutNode, len(pairs))
	for _, p := range pairs {
		f, err := l.compile(p.value, w)
		if err != nil {
			return layoutNode{}, err
		}
		fields[p.key.Value] = f
	}
	return layoutNode{fields: fields}, nil
}

// layoutError prefixes the message of a walk's error with "layout: ".
func layoutError(err error) error {
	if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) == 1 {
		line, msg, _ := strings.Cut(te.Errors[0], ": ")
		return &yaml.TypeError{Errors: []string{line + ": layout: " + msg}}
	}
	return err
}

func (l *Layout) compileScalar(n *yaml.Node) (layoutNode, error) {
	if n.Tag == "!!null" {
		return layoutNode{}, nil
	}
	if n.Tag != "!!str" {
		var v any
		if err := n.Decode(&v); err != nil {
			return layoutNode{}, lineError(n, "layout: %v", err)
		}
		l.warnings = append(l.warnings, fmt.Sprintf("line %d: layout value %s is written as it is "+
			"(kubernetes-event-exporter writes null for a value that is not a string)", n.Line, n.Value))
		l.theirWarnings = append(l.theirWarnings, fmt.Sprintf("line %d: layout value %s is written as null, "+
			"as kubernetes-event-exporter writes a value that is not a string (compat); quote it to write it", n.Line, n.Value))
		return layoutNode{value: v}, nil
	}
	t, err := parseTemplate(n.Value)
	if err != nil {
		return layoutNode{}, lineError(n, "layout: invalid template %q: %v", n.Value, err)
	}
	return layoutNode{tmpl: t, line: n.Line}, nil
}

// render executes the layout's templates against data. A value that is
// not a string is written as it is, or as null with theirs, as
// kubernetes-event-exporter writes it.
func (n *layoutNode) render(data any, buf *bytes.Buffer, theirs bool) (any, error) {
	switch {
	case n.tmpl != nil:
		buf.Reset()
		if err := n.tmpl.Execute(buf, data); err != nil {
			return nil, err
		}
		return buf.String(), nil
	case n.fields != nil:
		out := make(map[string]any, len(n.fields))
		for k, f := range n.fields {
			v, err := f.render(data, buf, theirs)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case n.list != nil:
		out := make([]any, len(n.list))
		for i, f := range n.list {
			v, err := f.render(data, buf, theirs)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case theirs:
		return nil, nil
	}
	return n.value, nil
}

// Bool is a boolean of kubernetes-event-exporter's configuration that
// accepts its documentation's placeholder ("true|false"): a value that is
// not a boolean is false, with a warning.
type Bool struct {
	// V is the value.
	V    bool
	bad  string // the value that is not a boolean, if any
	line int
}

// UnmarshalYAML reads a boolean, or keeps what to warn about.
func (b *Bool) UnmarshalYAML(n *yaml.Node) error {
	if err := n.Decode(&b.V); err != nil {
		b.V, b.bad, b.line = false, n.Value, n.Line
	}
	return nil
}

// warning returns the warning of a value that is not a boolean, naming
// key, or "".
func (b *Bool) warning(key string) string {
	if b.line == 0 {
		return ""
	}
	return fmt.Sprintf("line %d: %s: %q is not a boolean; taken as false", b.line, key, b.bad)
}

// warnings returns the payload's configuration warnings; theirs with
// compat kubernetes-event-exporter.
func (p *Payload) warnings(theirs bool) []string {
	var w []string
	switch {
	case p.Layout != nil && theirs:
		w = append(w, p.Layout.theirWarnings...)
	case p.Layout != nil:
		w = append(w, p.Layout.warnings...)
	}
	if dw := p.DeDot.warning("deDot"); dw != "" {
		w = append(w, dw)
	}
	return w
}

// encoder returns the encoder of records with clusterName cluster: the
// shared default record unless deDot or a layout changes it;
// kubernetes-event-exporter's with theirs (no fanout object, and a layout
// value that is not a string written as null).
func (p *Payload) encoder(cluster string, theirs bool) Encoder {
	if p == nil || (p.Layout == nil && !p.DeDot.V) {
		if theirs {
			return theirEventEncoder(cluster)
		}
		return EventEncoder(cluster)
	}
	return func(o *Occurrence) ([]byte, error) {
		e := o.record(cluster, theirs)
		if p.DeDot.V {
			d := e.DeDot()
			e = &d
		}
		if p.Layout == nil {
			return json.Marshal(e)
		}
		var buf bytes.Buffer
		v, err := p.Layout.root.render(e, &buf, theirs)
		if err != nil {
			return nil, fmt.Errorf("layout: %w", err)
		}
		return json.Marshal(v)
	}
}
