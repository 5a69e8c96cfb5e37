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
	// Receiver, in a Match rule, is where matching occurrences go.
	Receiver ReceiverRef `yaml:"receiver"`

	// Labels and Annotations are kubernetes-event-exporter's conditions
	// on the involved object's metadata. Involved objects are not looked
	// up here, so a rule with either never matches (as in
	// kubernetes-event-exporter with omitLookup: true); the configuration
	// warns about it.
	Labels      objectMatch `yaml:"labels"`
	Annotations objectMatch `yaml:"annotations"`
}

// objectMatch is a condition on the involved object's labels or
// annotations: a map of regular expressions, kept only to be warned about.
type objectMatch struct {
	set  bool
	line int
}

// UnmarshalYAML accepts a map and keeps its line.
func (m *objectMatch) UnmarshalYAML(n *yaml.Node) error {
	var v map[string]string
	if err := n.Decode(&v); err != nil {
		return lineError(n, "expected a map of label names to regular expressions")
	}
	m.set, m.line = len(v) > 0, n.Line
	return nil
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

// warnings returns the rule's warnings, each with its line.
func (r *Rule) warnings() []string {
	var w []string
	for _, p := range []*Pattern{&r.Namespace, &r.Kind, &r.APIVersion, &r.Reason, &r.Type, &r.Message, &r.Component, &r.Host} {
		if p.bad != "" {
			w = append(w, fmt.Sprintf("line %d: %s", p.line, p.bad))
		}
	}
	for _, m := range []struct {
		name string
		m    objectMatch
	}{{"labels", r.Labels}, {"annotations", r.Annotations}} {
		if m.m.set {
			w = append(w, fmt.Sprintf("line %d: %s: involved objects are not looked up, so this rule never matches "+
				"(as in kubernetes-event-exporter with omitLookup: true)", m.m.line, m.name))
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
}

// UnmarshalYAML reads the name, keeping its line.
func (r *ReceiverRef) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return lineError(n, "expected a receiver name (a string)")
	}
	r.Name, r.line = n.Value, n.Line
	return nil
}

// Matches reports whether o satisfies every field of the rule.
func (r *Rule) Matches(o *Occurrence) bool {
	return o.Count >= r.MinCount && !r.Labels.set && !r.Annotations.set &&
		r.Namespace.match(o.Namespace) &&
		r.Kind.match(o.Regarding.Kind) &&
		r.APIVersion.match(o.Regarding.APIVersion) &&
		r.Reason.match(o.Reason) &&
		r.Type.match(o.Type) &&
		r.Component.match(o.ReportingController) &&
		r.Host.match(o.ReportingInstance) &&
		r.Message.match(o.Message)
}

// receivers returns the set of receivers the tree sends o to, and whether a
// drop rule stopped it somewhere.
func (rt *Route) receivers(o *Occurrence) (set uint64, dropped bool) {
	for _, d := range rt.Drop {
		if d.Matches(o) {
			return 0, true
		}
	}
	all := true
	for _, m := range rt.Match {
		if m.Matches(o) {
			set |= m.Receiver.bit
		} else {
			all = false
		}
	}
	if all {
		for _, c := range rt.Routes {
			s, d := c.receivers(o)
			set |= s
			dropped = dropped || d
		}
	}
	return set, dropped && set == 0
}
