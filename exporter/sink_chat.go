package exporter

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
)

// SlackDefaultEndpoint is Slack's chat.postMessage method, which a slack
// receiver posts to unless its endpoint says otherwise.
const SlackDefaultEndpoint = "https://slack.com/api/chat.postMessage"

// SlackConfig configures a slack receiver: kubernetes-event-exporter's
// keys, posted as a webhook preset (one message per occurrence). Every
// value is a template executed against the occurrence's [EnhancedEvent],
// as there.
type SlackConfig struct {
	// Token is the bot token sent as "Authorization: Bearer <token>" to
	// the Web API.
	Token string `yaml:"token"`
	// Channel is the channel the message goes to.
	Channel string `yaml:"channel"`
	// Message is the message's text (default "{{ .Message }}").
	Message string `yaml:"message"`
	// Color, Footer, Title and AuthorName are the attachment's, which
	// is sent when Fields is set, as there.
	Color      string `yaml:"color"`
	Footer     string `yaml:"footer"`
	Title      string `yaml:"title"`
	AuthorName string `yaml:"author_name"`
	// Fields are the attachment's fields, by title, sorted by title.
	Fields map[string]string `yaml:"fields"`
	// Endpoint is the URL posted to (default [SlackDefaultEndpoint]); an
	// incoming webhook's URL needs no token.
	Endpoint string `yaml:"endpoint"`
	// Timeout bounds each request (default 10 s).
	Timeout Duration `yaml:"timeout"`
	// Payload's layout, if set, replaces the message built from the keys
	// above (which kubernetes-event-exporter's slack sink lacks).
	Payload `yaml:",inline"`
}

// slackTemplates are a slack receiver's parsed templates.
type slackTemplates struct {
	channel, message, color, footer, title, author *template.Template
	fields                                         map[string]*template.Template
}

// parse parses the templates; errors name the key.
func (c *SlackConfig) parse() (*slackTemplates, []string) {
	var p []string
	parse := func(key, text string) *template.Template {
		t, err := parseTemplate(text)
		if err != nil {
			p = append(p, fmt.Sprintf("slack.%s: invalid template %q: %v", key, text, err))
		}
		return t
	}
	t := &slackTemplates{channel: parse("channel", c.Channel), message: parse("message", cmp.Or(c.Message, "{{ .Message }}")),
		color: parse("color", c.Color), footer: parse("footer", c.Footer), title: parse("title", c.Title),
		author: parse("author_name", c.AuthorName), fields: map[string]*template.Template{}}
	for k, v := range c.Fields {
		t.fields[k] = parse("fields."+k, v)
	}
	return t, p
}

func (c *SlackConfig) validate() []string {
	_, p := c.parse()
	if c.Endpoint == "" && c.Channel == "" {
		p = append(p, "slack.channel is required (unless endpoint is an incoming webhook's URL)")
	}
	return append(p, presetProblems("slack", c.webhook())...)
}

// presetProblems returns the problems of a preset's webhook configuration,
// naming the preset's keys.
func presetProblems(kind string, w *WebhookConfig) []string {
	var p []string
	for _, m := range w.validate() {
		p = append(p, strings.Replace(m, "webhook.", kind+".", 1))
	}
	return p
}

// warnings returns the configuration's warnings.
func (c *SlackConfig) warnings() []string {
	if c.Endpoint == "" && c.Token == "" {
		return []string{"slack.token is empty: Slack refuses every message (not_authed), each counted rejected"}
	}
	return nil
}

// webhook returns the webhook configuration of the preset, without its
// encoder.
func (c *SlackConfig) webhook() *WebhookConfig {
	w := &WebhookConfig{Endpoint: c.Endpoint, Timeout: c.Timeout, check: slackCheck}
	if w.Endpoint == "" {
		w.Endpoint = SlackDefaultEndpoint
	}
	if c.Token != "" {
		w.Headers = map[string]string{"Authorization": "Bearer " + c.Token}
	}
	return w
}

// slackCheck checks a 2xx answer: the Web API answers its failures with
// 200 and {"ok": false, "error": ...}; an incoming webhook answers "ok".
// Only ratelimited is worth retrying.
func slackCheck(body []byte) error {
	var r struct {
		OK    *bool  `json:"ok"`
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &r) != nil || r.OK == nil || *r.OK {
		return nil
	}
	err := fmt.Errorf("slack: %s", r.Error)
	if r.Error == "ratelimited" || r.Error == "internal_error" || r.Error == "fatal_error" {
		return err
	}
	return Permanent(err)
}

// slackAttachment is a message attachment, as Slack's API takes it.
type slackAttachment struct {
	Color      string       `json:"color,omitempty"`
	Footer     string       `json:"footer,omitempty"`
	Title      string       `json:"title,omitempty"`
	AuthorName string       `json:"author_name,omitempty"`
	Fields     []slackField `json:"fields"`
}

// slackField is an attachment's field.
type slackField struct {
	Title string `json:"title"`
	Value string `json:"value"`
	Short bool   `json:"short"`
}

// encoder returns the encoder of the messages of records with clusterName
// cluster (kubernetes-event-exporter's records with theirs). The text is
// escaped as Slack's API asks (& < > as &amp; &lt; &gt;, as
// kubernetes-event-exporter does), so that an event's message cannot
// mention a channel or make a link; the attachment is not, as there.
func (c *SlackConfig) encoder(cluster string, theirs bool) Encoder {
	if c.Layout != nil {
		return c.Payload.encoder(cluster, theirs)
	}
	t, _ := c.parse() // checked by validate
	return func(o *Occurrence) ([]byte, error) {
		e := o.record(cluster, theirs)
		var buf bytes.Buffer
		var errs []error
		exec := func(t *template.Template) string {
			if t == nil {
				return ""
			}
			buf.Reset()
			errs = append(errs, t.Execute(&buf, e))
			return buf.String()
		}
		msg := map[string]any{"channel": exec(t.channel), "text": slackEscape(exec(t.message))}
		if len(t.fields) > 0 {
			a := slackAttachment{Color: exec(t.color), Footer: exec(t.footer), Title: exec(t.title), AuthorName: exec(t.author)}
			for _, k := range slices.Sorted(maps.Keys(t.fields)) {
				a.Fields = append(a.Fields, slackField{Title: k, Value: exec(t.fields[k])})
			}
			msg["attachments"] = []slackAttachment{a}
		}
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("slack: %w", err)
		}
		return json.Marshal(msg)
	}
}

// TeamsConfig configures a teams receiver: kubernetes-event-exporter's
// keys, posted as a webhook preset (one message per occurrence). The
// message is theirs: {"summary": "event", "text": "Event: <message>
// \nStatus: <reason> \nMetadata: <metadata>"}, its values taken from the
// record (the Event JSON, or the layout's message, reason and metadata).
type TeamsConfig struct {
	// Endpoint is the Teams webhook's URL.
	Endpoint string `yaml:"endpoint"`
	// Headers are added to every request; values are templates, as a
	// webhook's.
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds each request (default 10 s).
	Timeout Duration `yaml:"timeout"`
	// Payload is the layout and deDot of the record the text is made of.
	Payload `yaml:",inline"`
}

func (c *TeamsConfig) validate() []string {
	return presetProblems("teams", c.webhook())
}

// webhook returns the webhook configuration of the preset, without its
// encoder.
func (c *TeamsConfig) webhook() *WebhookConfig {
	return &WebhookConfig{Endpoint: c.Endpoint, Headers: c.Headers, Timeout: c.Timeout, check: teamsCheck}
}

// teamsCheck checks a 2xx answer: a Teams connector reports throttling
// in the body of a 200.
func teamsCheck(body []byte) error {
	if bytes.Contains(body, []byte("HTTP error 429")) {
		return fmt.Errorf("teams: rate limited: %s", snippet(body))
	}
	return nil
}

// teamsEncoder returns the encoder of Teams messages made of the records
// enc makes.
func teamsEncoder(enc Encoder) Encoder {
	return func(o *Occurrence) ([]byte, error) {
		rec, err := enc(o)
		if err != nil {
			return nil, err
		}
		var fields map[string]any
		if err := json.Unmarshal(rec, &fields); err != nil {
			return nil, fmt.Errorf("teams: the record is not a JSON object: %w", err)
		}
		text := fmt.Sprintf("Event: %s \nStatus: %s \nMetadata: %s",
			teamsValue(fields["message"]), teamsValue(fields["reason"]), teamsValue(fields["metadata"]))
		return json.Marshal(map[string]string{"summary": "event", "text": text})
	}
}

// teamsValue returns a record value as text: a string as it is, anything
// else as JSON.
func teamsValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v) // a value decoded from JSON encodes
	return string(b)
}
