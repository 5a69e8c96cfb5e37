package exporter

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file holds the check of a configuration's templates at load: each
// is executed against a sample event whose every field is set. A template
// whose execution fails on the structure of the data (a field or method
// the record does not have, a wrong number or type of arguments) fails on
// every event, and is refused; one that fails in a function it calls
// (sprig's must* functions, fail, index out of range) may succeed on
// other events, and is a warning.

// templated is a sink configuration whose keys hold templates other than
// a layout's (headers, chat messages).
type templated interface {
	// templateTexts returns the templates by key, those that parse
	// (the others are reported, or sent as they are).
	templateTexts() map[string]string
}

// headersTemplated is a templated sink configuration whose templates are
// headers: a header whose template fails is sent as written, as
// kubernetes-event-exporter sends it, so a failure is a warning.
type headersTemplated interface {
	templated
	headersOnly()
}

func (*WebhookConfig) headersOnly() {}
func (*LokiConfig) headersOnly()    {}
func (*TeamsConfig) headersOnly()   {}

// templateProblems executes every template of the receivers against the
// sample event's record (kubernetes-event-exporter's, without the fanout
// object, for a receiver with its compat), adding a warning for a template
// that fails in a function, and returns a problem for each that fails on
// the data's structure.
func (c *Config) templateProblems() []string {
	sample := sampleOccurrence()
	var p []string
	for _, r := range c.Receivers {
		if r == nil {
			continue
		}
		data := recordData{c.ClusterName, r.kee}.of(sample)
		report := c.templateReporter(r, &p)
		if pl := r.payload(); pl != nil && pl.Layout != nil && r.Format != FormatFanout {
			d := data
			if pl.DeDot.V {
				dd := data.DeDot()
				d = &dd
			}
			pl.Layout.root.check(d, report)
		}
		if t, ok := r.kindConfig().(templated); ok {
			texts := t.templateTexts()
			for _, key := range slices.Sorted(maps.Keys(texts)) {
				report(r.line, key, texts[key], executeOnce(texts[key], data))
			}
		}
	}
	return p
}

// templateReporter returns the function that reports the failure of one
// of r's templates: a problem appended to *p when it fails on every event
// (a header's is a warning: the header is sent as written), else a
// warning.
func (c *Config) templateReporter(r *Receiver, p *[]string) func(line int, key, text string, err error) {
	_, headers := r.kindConfig().(headersTemplated)
	return func(line int, key, text string, err error) {
		if err == nil {
			return
		}
		msg, everyEvent := templateFailure(err)
		if r.kee && strings.Contains(text, ".Fanout") {
			msg += " (with compat " + CompatKEE + " the record has no fanout object, as theirs)"
		}
		switch {
		case everyEvent && headers && strings.HasPrefix(key, "headers."):
			c.Warnings = append(c.Warnings, fmt.Sprintf("line %d: receiver %q: %s: template %q fails on every "+
				"event: the header is sent as written, as kubernetes-event-exporter sends it: %s", line, r.Name, key, text, msg))
		case everyEvent:
			*p = append(*p, fmt.Sprintf("line %d: receiver %q: %s: template %q fails on every event: %s",
				line, r.Name, key, text, msg))
		default:
			c.Warnings = append(c.Warnings, fmt.Sprintf("line %d: receiver %q: %s: template %q fails on a sample "+
				"event (it may succeed on others): %s", line, r.Name, key, text, msg))
		}
	}
}

// check executes the layout's templates against data, reporting each
// failure with its line.
func (n *layoutNode) check(data any, report func(line int, key, text string, err error)) {
	switch {
	case n.tmpl != nil:
		report(n.line, "layout", n.tmpl.Root.String(), n.tmpl.Execute(&bytes.Buffer{}, data))
	case n.fields != nil:
		for _, k := range slices.Sorted(maps.Keys(n.fields)) {
			f := n.fields[k]
			f.check(data, report)
		}
	default:
		for i := range n.list {
			n.list[i].check(data, report)
		}
	}
}

// executeOnce parses text and executes it against data, returning the
// execution's error (nil for a text that does not parse: it is reported
// where it is parsed).
func executeOnce(text string, data any) error {
	t, err := parseTemplate(text)
	if err != nil {
		return nil
	}
	return t.Execute(&bytes.Buffer{}, data)
}

// templateFailure returns the message of a template's execution error,
// without text/template's prefix, and whether the template fails on every
// event: the error is about the data's structure rather than raised by a
// function the template calls ("error calling ...").
func templateFailure(err error) (msg string, everyEvent bool) {
	msg = err.Error()
	if _, after, ok := strings.Cut(msg, "\" at "); ok {
		msg = "at " + after
	}
	return msg, !strings.Contains(msg, "error calling ")
}

// templateTexts returns the webhook's header templates.
func (c *WebhookConfig) templateTexts() map[string]string { return headerTexts("headers.", c.Headers) }

// templateTexts returns the loki receiver's header templates.
func (c *LokiConfig) templateTexts() map[string]string { return headerTexts("headers.", c.Headers) }

// templateTexts returns the teams receiver's header templates.
func (c *TeamsConfig) templateTexts() map[string]string { return headerTexts("headers.", c.Headers) }

// templateTexts returns the slack receiver's message templates, unless a
// layout replaces the message.
func (c *SlackConfig) templateTexts() map[string]string {
	if c.Layout != nil {
		return nil
	}
	out := map[string]string{}
	for key, text := range map[string]string{"channel": c.Channel, "message": c.Message, "color": c.Color,
		"footer": c.Footer, "title": c.Title, "author_name": c.AuthorName} {
		if text != "" {
			out[key] = text
		}
	}
	for k, v := range c.Fields {
		out["fields."+k] = v
	}
	return out
}

// templateTexts returns the opsgenie receiver's templates.
func (c *OpsgenieConfig) templateTexts() map[string]string {
	out := map[string]string{"message": c.Message, "alias": c.Alias, "description": c.Description}
	for i, tag := range c.Tags {
		out[fmt.Sprintf("tags[%d]", i)] = tag
	}
	for k, v := range c.Details {
		out["details."+k] = v
	}
	return out
}

// templateTexts returns the opscenter receiver's templates.
func (c *OpsCenterConfig) templateTexts() map[string]string {
	out := map[string]string{"title": c.Title, "description": c.Description, "source": c.Source,
		"category": c.Category, "severity": c.Severity, "priority": c.Priority}
	for k, v := range c.OperationalData {
		out["operationalData."+k] = v
	}
	for k, v := range c.Tags {
		out["tags."+k] = v
	}
	for i, v := range c.Notifications {
		out[fmt.Sprintf("notifications[%d]", i)] = v
	}
	for i, v := range c.RelatedOpsItems {
		out[fmt.Sprintf("relatedOpsItems[%d]", i)] = v
	}
	return out
}

// headerTexts returns the header values of h that are templates, by
// prefix and name.
func headerTexts(prefix string, h map[string]string) map[string]string {
	out := map[string]string{}
	for k := range headerTemplates(h) {
		out[prefix+k] = h[k]
	}
	return out
}

// sampleOccurrence returns the occurrence templates are checked against:
// a Warning event with every field of the core/v1 Event set (series,
// related object, source, labels, annotations), its involved object
// looked up with labels, annotations and an owner.
func sampleOccurrence() *Occurrence {
	t := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	mt := metav1.NewMicroTime(t.Time)
	ref := corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0", UID: "0000-pod",
		APIVersion: "v1", ResourceVersion: "1", FieldPath: "spec.containers{web}"}
	rel := ref
	rel.Kind, rel.Name, rel.UID = "Node", "node-1", "0000-node"
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-0.1", UID: "0000-event", ResourceVersion: "2",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "sample"},
			CreationTimestamp: t},
		InvolvedObject: ref, Related: &rel, Reason: "BackOff", Message: "Back-off restarting failed container",
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: t, LastTimestamp: t, Count: 2, Type: corev1.EventTypeWarning, EventTime: mt,
		Series: &corev1.EventSeries{Count: 2, LastObservedTime: mt},
		Action: "Restarting", ReportingController: "kubelet", ReportingInstance: "node-1",
	}
	o := FromCore(e)
	ctrl := true
	o.object = &ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "sre"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web",
			UID: "0000-sts", Controller: &ctrl}}}
	return o
}
