package exporter

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/template"
	"time"
)

// OpsgenieConfig configures an opsgenie receiver, with
// kubernetes-event-exporter's keys (and timeout): each occurrence creates
// an alert through Opsgenie's Alert API (POST /v2/alerts). Message, Alias,
// Description, each tag and each detail are templates, executed against
// the occurrence's [EnhancedEvent] (without its Fanout object when the
// receiver gets kubernetes-event-exporter's stream, [CompatKEE], as
// there).
type OpsgenieConfig struct {
	// APIKey is the key of an Opsgenie API integration, sent as
	// "Authorization: GenieKey <key>".
	APIKey string `yaml:"apiKey"`
	// URL is the API's host, as in kubernetes-event-exporter (whose
	// Opsgenie SDK calls it the API URL): api.opsgenie.com (the
	// default), api.eu.opsgenie.com or api.sandbox.opsgenie.com. As that
	// SDK does, a host is reached over https, or http when its name does
	// not contain "api"; a URL with a scheme (http://host:port) is used
	// as it is.
	URL string `yaml:"URL"`
	// Priority is P1 to P5 (default P3).
	Priority string `yaml:"priority"`
	// Message is the alert's message (required; Opsgenie keeps 130
	// characters).
	Message string `yaml:"message"`
	// Alias, if set, identifies the alert: Opsgenie adds an occurrence
	// to an open alert with the same alias rather than opening another.
	Alias string `yaml:"alias"`
	// Description is the alert's description.
	Description string `yaml:"description"`
	// Tags are the alert's tags.
	Tags []string `yaml:"tags"`
	// Details are the alert's custom properties.
	Details map[string]string `yaml:"details"`
	// Timeout bounds each request (default 10 s).
	Timeout Duration `yaml:"timeout"`

	// kee executes the templates against kubernetes-event-exporter's
	// record, without the fanout object (compat).
	kee bool
}

// opsgeniePriorities are the priorities of an alert.
var opsgeniePriorities = []string{"P1", "P2", "P3", "P4", "P5"}

func (c *OpsgenieConfig) validate() []string {
	var p []string
	if c.APIKey == "" {
		p = append(p, "opsgenie.apiKey is required (kubernetes-event-exporter does not start without it either)")
	}
	if c.Message == "" {
		p = append(p, "opsgenie.message is required: Opsgenie refuses an alert without a message")
	}
	if c.Priority != "" && !slices.Contains(opsgeniePriorities, c.Priority) {
		p = append(p, fmt.Sprintf("opsgenie.priority %q is unknown (want P1 to P5)", c.Priority))
	}
	if _, err := c.endpoint(); err != nil {
		p = append(p, err.Error())
	}
	if _, err := c.compile(); err != nil {
		p = append(p, err.Error())
	}
	return append(p, connectionProblems("opsgenie", &c.Timeout, nil)...)
}

// endpoint returns the URL alerts are posted to.
func (c *OpsgenieConfig) endpoint() (string, error) {
	base := cmp.Or(c.URL, "api.opsgenie.com")
	if !strings.Contains(base, "://") {
		scheme := "https://"
		if !strings.Contains(base, "api") { // the SDK's rule
			scheme = "http://"
		}
		base = scheme + base
	}
	if p := httpURLProblem("opsgenie.URL", base); p != "" {
		return "", errors.New(p)
	}
	return strings.TrimSuffix(base, "/") + "/v2/alerts", nil
}

// opsgenieTemplates are the parsed templates of an alert.
type opsgenieTemplates struct {
	message, alias, description *template.Template
	tags                        []*template.Template
	details                     map[string]*template.Template
}

// compile parses the templates; an error names the key.
func (c *OpsgenieConfig) compile() (*opsgenieTemplates, error) {
	var errs []error
	parse := func(key, text string) *template.Template {
		t, err := parseTemplate(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("opsgenie.%s: %w", key, err))
		}
		return t
	}
	t := &opsgenieTemplates{message: parse("message", c.Message), alias: parse("alias", c.Alias),
		description: parse("description", c.Description), details: map[string]*template.Template{}}
	for i, tag := range c.Tags {
		t.tags = append(t.tags, parse(fmt.Sprintf("tags[%d]", i), tag))
	}
	for _, k := range slices.Sorted(maps.Keys(c.Details)) {
		t.details[k] = parse("details."+k, c.Details[k])
	}
	return t, errors.Join(errs...)
}

// opsgenieAlert is the body of a create-alert request: the fields
// kubernetes-event-exporter sets, named and left out when empty as in
// Opsgenie's SDK.
type opsgenieAlert struct {
	Message     string            `json:"message"`
	Alias       string            `json:"alias,omitempty"`
	Description string            `json:"description,omitempty"`
	Tags        []string          `json:"tags,omitempty"`
	Details     map[string]string `json:"details,omitempty"`
	Priority    string            `json:"priority,omitempty"`
}

// OpsgenieSink creates an Opsgenie alert per occurrence. Opsgenie answers
// 202 once it has queued the request; 429 and 5xx but 501 (as Opsgenie's
// SDK) and transport errors are retried; any other answer is [Permanent],
// and so is an alert whose templates fail or whose message is empty.
// Write is safe for concurrent use.
type OpsgenieSink struct {
	cfg      OpsgenieConfig
	endpoint string
	tmpl     *opsgenieTemplates
	data     recordData
	client   *http.Client
}

// NewOpsgenieSink returns an opsgenie sink whose templates see
// clusterName cluster; it sends nothing until the first write.
func NewOpsgenieSink(cfg OpsgenieConfig, cluster string) (*OpsgenieSink, error) {
	if p := cfg.validate(); len(p) > 0 {
		return nil, errors.New(p[0])
	}
	endpoint, _ := cfg.endpoint()
	tmpl, _ := cfg.compile()
	tr, _ := httpTransport("opsgenie", nil)
	return &OpsgenieSink{cfg: cfg, endpoint: endpoint, tmpl: tmpl, data: recordData{cluster, cfg.kee},
		client: &http.Client{Transport: tr, Timeout: time.Duration(cfg.Timeout)}}, nil
}

// Write creates the alerts of the batch, one request each, in order.
func (s *OpsgenieSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	for i, o := range batch {
		if err := s.create(ctx, o); err != nil {
			return i, fmt.Errorf("opsgenie: occurrence %s: %w", o.Key(), err)
		}
	}
	return len(batch), nil
}

// create posts o's alert.
func (s *OpsgenieSink) create(ctx context.Context, o *Occurrence) error {
	alert, err := s.alert(o)
	if err != nil {
		return Permanent(err)
	}
	body, err := json.Marshal(alert)
	if err != nil {
		return Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "GenieKey "+s.cfg.APIKey)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	return statusError(s.endpoint, resp, readAnswer(resp, 64<<10), func(code int) bool {
		return code == http.StatusTooManyRequests || code >= 500 && code != http.StatusNotImplemented
	})
}

// alert renders o's alert.
func (s *OpsgenieSink) alert(o *Occurrence) (*opsgenieAlert, error) {
	ev := s.data.of(o)
	var buf bytes.Buffer
	var errs []error
	render := func(t *template.Template) string {
		buf.Reset()
		if err := t.Execute(&buf, ev); err != nil {
			errs = append(errs, err)
		}
		return buf.String()
	}
	a := &opsgenieAlert{Message: render(s.tmpl.message), Description: render(s.tmpl.description),
		Priority: cmp.Or(s.cfg.Priority, "P3")}
	if s.cfg.Alias != "" {
		a.Alias = render(s.tmpl.alias)
	}
	for _, t := range s.tmpl.tags {
		a.Tags = append(a.Tags, render(t))
	}
	if len(s.tmpl.details) > 0 {
		a.Details = make(map[string]string, len(s.tmpl.details))
		for k, t := range s.tmpl.details {
			a.Details[k] = render(t)
		}
	}
	if a.Message == "" {
		errs = append(errs, errors.New("the message is empty"))
	}
	return a, errors.Join(errs...)
}

// Close closes idle connections.
func (s *OpsgenieSink) Close(context.Context) error {
	s.client.CloseIdleConnections()
	return nil
}
