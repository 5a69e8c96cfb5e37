package exporter

import (
	"fmt"
	"regexp"

	"go.yaml.in/yaml/v3"
)

// Route is a node of the route tree, as in kubernetes-event-exporter: an
// occurrence that matches any Drop rule goes no further down this node.
// Otherwise every Match rule that matches it sends it to the rule's
// receiver (if it names one), and if every Match rule matched (a rule
// without a receiver is a pure filter), the occurrence goes on to each of
// the child Routes. An occurrence reaches each receiver at most once,
// however many rules select it.
type Route struct {
	// Drop rules stop an occurrence at this node.
	Drop []*Rule `yaml:"drop"`
	// Match rules send it to their receivers, and gate the children.
	Match []*Rule `yaml:"match"`
	// Routes are the child nodes.
	Routes []*Route `yaml:"routes"`
}

// Rule matches occurrences. Every field set must match; the string fields
// are regular expressions (RE2, unanchored, as in
// kubernetes-event-exporter) matched against the occurrence.
type Rule struct {
	// Namespace matches the event's namespace.
	Namespace Pattern `yaml:"namespace"`
	// Kind and APIVersion match the regarding (involved) object's.
	Kind       Pattern `yaml:"kind"`
	APIVersion Pattern `yaml:"apiVersion"`
	// Reason, Type and Message match the event's.
	Reason  Pattern `yaml:"reason"`
	Type    Pattern `yaml:"type"`
	Message Pattern `yaml:"message"`
	// Component matches the reporting controller (core/v1: the source
	// component when no reporting controller is set); Host the reporting
	// instance (or source host).
	Component Pattern `yaml:"component"`
	Host      Pattern `yaml:"host"`
	// MinCount matches occurrences whose count is at least MinCount.
	MinCount int32 `yaml:"minCount"`
	// Receiver, in a Match rule, is where matching occurrences go; in a
	// Drop rule it is ignored, with a warning, as in
	// kubernetes-event-exporter.
	Receiver ReceiverRef `yaml:"receiver"`

	// Labels and Annotations are kubernetes-event-exporter's conditions
	// on the involved object's metadata, maps of label (annotation) names
	// to regular expressions: every name must be present on the object,
	// its value matching the expression (unanchored, as theirs; a null
	// expression, "canary: ~", matches any value, as theirs decodes it
	// as ""). The
	// object is looked up (see [Lookup]) only for a rule that has them,
	// once the rule's other fields matched; a rule with them never
	// matches when lookups are off (omitLookup: true, with a warning) or
	// the lookup failed.
	Labels      ObjectMatch `yaml:"labels"`
	Annotations ObjectMatch `yaml:"annotations"`

	// theirs matches as kubernetes-event-exporter does (compat, set by
	// validation): Component and Host against the source's component and
	// host only, MinCount against the Event's count as it is (0 for an
	// event that has none).
	theirs bool
}

// ObjectMatch is a condition on the involved object's labels or
// annotations: names, each with a regular expression its value must match.
type ObjectMatch struct {
	names []string
	pats  []Pattern
	line  int
}

// UnmarshalYAML compiles a map of names to regular expressions, keeping
// its line.
func (m *ObjectMatch) UnmarshalYAML(n *yaml.Node) error {
	var w nodeWalk
	n, err := w.enter(n)
	if err != nil {
		return err
	}
	if n.Kind != yaml.MappingNode {
		return lineError(n, "expected a map of names to regular expressions")
	}
	m.line = n.Line
	pairs, err := w.pairs(n)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		v := resolveAlias(kv.value)
		var p Pattern // null: the name must be present, with any value
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!null" {
			if err := p.UnmarshalYAML(v); err != nil {
				return err
			}
		}
		m.names, m.pats = append(m.names, kv.key.Value), append(m.pats, p)
	}
	return nil
}

// set reports whether the condition names anything.
func (m *ObjectMatch) set() bool { return len(m.names) > 0 }

// match reports whether every name is in values with a matching value.
func (m *ObjectMatch) match(values map[string]string) bool {
	for i, name := range m.names {
		v, ok := values[name]
		if !ok || !m.pats[i].match(v) {
			return false
		}
	}
	return true
}

// Pattern is a regular expression of a [Rule]; the zero Pattern matches
// everything. An expression that does not compile never matches, as in
// kubernetes-event-exporter; the configuration warns about it.
type Pattern struct {
	re   *regexp.Regexp
	bad  string // why it never matches
	line int
}

// UnmarshalYAML compiles the expression.
func (p *Pattern) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return lineError(n, "expected a regular expression (a string)")
	}
	re, err := regexp.Compile(n.Value)
	if err != nil {
		p.bad, p.line = fmt.Sprintf("invalid regular expression %q never matches (as in kubernetes-event-exporter): %v", n.Value, err), n.Line
		return nil
	}
	p.re = re
	return nil
}

// warnings returns the rule's warnings, each with its line; omitLookup
// is the configuration's.
func (r *Rule) warnings(omitLookup bool) []string {
	var w []string
	pats := []*Pattern{&r.Namespace, &r.Kind, &r.APIVersion, &r.Reason, &r.Type, &r.Message, &r.Component, &r.Host}
	for _, m := range []*ObjectMatch{&r.Labels, &r.Annotations} {
		for i := range m.pats {
			pats = append(pats, &m.pats[i])
		}
	}
	for _, p := range pats {
		if p.bad != "" {
			w = append(w, fmt.Sprintf("line %d: %s", p.line, p.bad))
		}
	}
	for _, m := range []struct {
		name string
		m    *ObjectMatch
	}{{"labels", &r.Labels}, {"annotations", &r.Annotations}} {
		if m.m.set() && omitLookup {
			w = append(w, fmt.Sprintf("line %d: %s: involved objects are not looked up (omitLookup: true), "+
				"so this rule never matches (as in kubernetes-event-exporter)", m.m.line, m.name))
		}
	}
	return w
}

// String returns the expression.
func (p Pattern) String() string {
	if p.re == nil {
		return ""
	}
	return p.re.String()
}

func (p Pattern) match(s string) bool {
	if p.bad != "" {
		return false
	}
	return p.re == nil || p.re.MatchString(s)
}

// ReceiverRef names a receiver in a [Rule].
type ReceiverRef struct {
	// Name is the receiver's name.
	Name string
	line int
	bit  uint64
	// repeat is set when the receiver gets kubernetes-event-exporter's
	// stream: it gets an occurrence once per matching rule that names it.
	repeat bool
}

// UnmarshalYAML reads the name, keeping its line.
func (r *ReceiverRef) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return lineError(n, "expected a receiver name (a string)")
	}
	r.Name, r.line = n.Value, n.Line
	return nil
}

// Matches reports whether o satisfies every field of the rule. The
// involved object is looked up only if the rule has labels or annotations
// and every other field matched.
func (r *Rule) Matches(o *Occurrence) bool {
	count, component, host := o.Count, o.ReportingController, o.ReportingInstance
	if r.theirs {
		e := o.coreEvent()
		count, component, host = e.Count, e.Source.Component, e.Source.Host
	}
	return count >= r.MinCount &&
		r.Namespace.match(o.Namespace) &&
		r.Kind.match(o.Regarding.Kind) &&
		r.APIVersion.match(o.Regarding.APIVersion) &&
		r.Reason.match(o.Reason) &&
		r.Type.match(o.Type) &&
		r.Component.match(component) &&
		r.Host.match(host) &&
		r.Message.match(o.Message) &&
		r.objectMatches(o)
}

// objectMatches reports whether the involved object's labels and
// annotations satisfy the rule's conditions, looking it up if needed.
func (r *Rule) objectMatches(o *Occurrence) bool {
	if !r.Labels.set() && !r.Annotations.set() {
		return true
	}
	m := o.involvedObject()
	return m != nil && r.Labels.match(m.Labels) && r.Annotations.match(m.Annotations)
}

// receivers returns the set of receivers the tree sends o to, and whether a
// drop rule stopped it somewhere. It counts in o.extra the rules beyond
// the first that select a receiver that gets an occurrence once per rule.
func (rt *Route) receivers(o *Occurrence) (set uint64, dropped bool) {
	o.extra = nil
	return rt.route(o, 0)
}

// route adds to set the receivers the node sends o to.
func (rt *Route) route(o *Occurrence, set uint64) (uint64, bool) {
	for _, d := range rt.Drop {
		if d.Matches(o) {
			return set, true
		}
	}
	all := true
	for _, m := range rt.Match {
		if !m.Matches(o) {
			all = false
			continue
		}
		if b := m.Receiver.bit; set&b != 0 && m.Receiver.repeat {
			if o.extra == nil {
				o.extra = map[uint64]int{}
			}
			o.extra[b]++
		}
		set |= m.Receiver.bit
	}
	dropped := false
	if all {
		for _, c := range rt.Routes {
			var d bool
			set, d = c.route(o, set)
			dropped = dropped || d
		}
	}
	return set, dropped && set == 0
}
