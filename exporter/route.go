package exporter

import (
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

	// Labels and Annotations (kubernetes-event-exporter's matching on the
	// involved object's metadata) are not supported: the configuration
	// is rejected if they are set.
	Labels      unsupported `yaml:"labels"`
	Annotations unsupported `yaml:"annotations"`
}

// unsupported rejects a field of kubernetes-event-exporter's configuration
// that this exporter does not implement.
type unsupported struct{}

func (unsupported) UnmarshalYAML(n *yaml.Node) error {
	return lineError(n, "matching on the involved object's labels or annotations is not supported "+
		"(it costs a read of every involved object); match on namespace, kind, reason or component instead")
}

// Pattern is a regular expression of a [Rule]; the zero Pattern matches
// everything.
type Pattern struct{ re *regexp.Regexp }

// UnmarshalYAML compiles the expression, naming the line on error.
func (p *Pattern) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return lineError(n, "expected a regular expression (a string)")
	}
	re, err := regexp.Compile(n.Value)
	if err != nil {
		return lineError(n, "invalid regular expression %q: %v", n.Value, err)
	}
	p.re = re
	return nil
}

// String returns the expression.
func (p Pattern) String() string {
	if p.re == nil {
		return ""
	}
	return p.re.String()
}

func (p Pattern) match(s string) bool { return p.re == nil || p.re.MatchString(s) }

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
	return o.Count >= r.MinCount &&
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
