package exporter

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// OpsCenterConfig configures an opscenter receiver (kubernetes-event-exporter's
// keys; and this exporter's endpoint and timeout): each occurrence creates
// one OpsItem in AWS Systems Manager OpsCenter. Every value is a template
// (text/template with the sprig functions, as in layouts) executed against
// the occurrence's [EnhancedEvent] (without its Fanout object when the
// receiver gets kubernetes-event-exporter's stream, [CompatKEE], as
// there).
type OpsCenterConfig struct {
	// Title, Description and Source are required. A title longer than
	// 1,024 characters, or a description longer than 2,048, is cut to the
	// service's limit.
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
	Source      string `yaml:"source"`
	// Category, Severity and Priority (a number, 1 to 5) are optional.
	Category string `yaml:"category"`
	Severity string `yaml:"severity"`
	Priority string `yaml:"priority"`
	// OperationalData are searchable strings (SearchableString) by key.
	OperationalData map[string]string `yaml:"operationalData"`
	// Tags are the OpsItem's tags.
	Tags map[string]string `yaml:"tags"`
	// Notifications are the ARNs of SNS topics notified of changes.
	Notifications []string `yaml:"notifications"`
	// RelatedOpsItems are the IDs of related OpsItems.
	RelatedOpsItems []string `yaml:"relatedOpsItems"`
	// AWSConfig has the region, endpoint and timeout.
	AWSConfig `yaml:",inline"`

	data recordData // the data of the templates
	tmpl opsTemplates
}

// opsTemplates are an opscenter receiver's parsed templates.
type opsTemplates struct {
	title, description, source, category, severity, priority *template.Template
	data, tags                                               map[string]*template.Template
	notifications, related                                   []*template.Template
}

// The lengths CreateOpsItem accepts for a title and a description.
const (
	opsTitleMax       = 1024
	opsDescriptionMax = 2048
)

func (c *OpsCenterConfig) validate() []string {
	var p []string
	for key, v := range map[string]string{"title": c.Title, "description": c.Description, "source": c.Source} {
		if v == "" {
			p = append(p, "opscenter."+key+" is required")
		}
	}
	slices.Sort(p)
	c.tmpl = opsTemplates{}
	t := &c.tmpl
	parse := func(key, text string) *template.Template {
		tp, err := parseTemplate(text)
		if err != nil {
			p = append(p, fmt.Sprintf("opscenter.%s: invalid template %q: %v", key, text, err))
		}
		return tp
	}
	t.title, t.description, t.source = parse("title", c.Title), parse("description", c.Description), parse("source", c.Source)
	t.category, t.severity, t.priority = parse("category", c.Category), parse("severity", c.Severity), parse("priority", c.Priority)
	t.data, t.tags = map[string]*template.Template{}, map[string]*template.Template{}
	for _, k := range slices.Sorted(maps.Keys(c.OperationalData)) {
		t.data[k] = parse("operationalData."+k, c.OperationalData[k])
	}
	for _, k := range slices.Sorted(maps.Keys(c.Tags)) {
		t.tags[k] = parse("tags."+k, c.Tags[k])
	}
	for i, v := range c.Notifications {
		t.notifications = append(t.notifications, parse(fmt.Sprintf("notifications[%d]", i), v))
	}
	for i, v := range c.RelatedOpsItems {
		t.related = append(t.related, parse(fmt.Sprintf("relatedOpsItems[%d]", i), v))
	}
	return append(p, c.AWSConfig.validate("opscenter")...)
}

// OpsCenterSink creates an OpsItem per occurrence with CreateOpsItem (the
// service has no batch API), as kubernetes-event-exporter does, with two
// differences: relatedOpsItems are the configured ones (it sends the
// operational data's values instead), and a title or description beyond
// the service's limit is cut to it (it sends them, and the service refuses
// the item).
//
// An occurrence whose templates fail, or whose priority is not a number,
// and an item the service refuses as the client's fault are [Permanent];
// throttling, server faults and missing credentials or permissions are
// retried (see [AWSConfig]).
type OpsCenterSink struct {
	cfg          OpsCenterConfig
	client       *ssm.Client
	awsTransport // Close closes its idle connections
}

// NewOpsCenterSink returns an OpsCenter sink; it sends nothing until the
// first write.
func NewOpsCenterSink(cfg OpsCenterConfig) (*OpsCenterSink, error) {
	client, tr, err := awsClient("opscenter", &cfg.AWSConfig, "", cfg.validate(), ssm.NewFromConfig,
		func(o *ssm.Options) **string { return &o.BaseEndpoint })
	if err != nil {
		return nil, err
	}
	return &OpsCenterSink{cfg: cfg, client: client, awsTransport: tr}, nil
}

// Write creates the OpsItems of the batch, in order; see [OpsCenterSink].
func (s *OpsCenterSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	for i, o := range batch {
		in, err := s.input(o)
		if err != nil {
			return i, Permanent(fmt.Errorf("opscenter: occurrence %s: %w", o.Key(), err))
		}
		rctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.Timeout))
		_, err = s.client.CreateOpsItem(rctx, in)
		cancel()
		if err != nil {
			return i, awsError("opscenter: occurrence "+o.Key(), err)
		}
	}
	return len(batch), nil
}

// input returns the CreateOpsItem input of o.
func (s *OpsCenterSink) input(o *Occurrence) (*ssm.CreateOpsItemInput, error) {
	t := &s.cfg.tmpl
	r := opsRenderer{data: s.cfg.data.of(o)}
	in := &ssm.CreateOpsItemInput{Title: aws.String(truncateRunes(r.run(t.title), opsTitleMax)),
		Description: aws.String(truncateRunes(r.run(t.description), opsDescriptionMax)), Source: aws.String(r.run(t.source)),
		Category: r.optional(s.cfg.Category, t.category), Severity: r.optional(s.cfg.Severity, t.severity)}
	if p := r.optional(s.cfg.Priority, t.priority); p != nil {
		n, err := strconv.ParseInt(strings.TrimSpace(*p), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("priority %q is not a number", *p)
		}
		in.Priority = aws.Int32(int32(n))
	}
	if len(t.data) > 0 {
		in.OperationalData = map[string]types.OpsItemDataValue{}
		for k, tp := range t.data {
			in.OperationalData[k] = types.OpsItemDataValue{Type: types.OpsItemDataTypeSearchableString, Value: aws.String(r.run(tp))}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.tags)) {
		in.Tags = append(in.Tags, types.Tag{Key: aws.String(k), Value: aws.String(r.run(t.tags[k]))})
	}
	for _, tp := range t.notifications {
		in.Notifications = append(in.Notifications, types.OpsItemNotification{Arn: aws.String(r.run(tp))})
	}
	for _, tp := range t.related {
		in.RelatedOpsItems = append(in.RelatedOpsItems, types.RelatedOpsItem{OpsItemId: aws.String(r.run(tp))})
	}
	return in, r.err
}

// opsRenderer executes templates against data, keeping the first error.
type opsRenderer struct {
	data any
	buf  strings.Builder
	err  error
}

// run returns what t writes ("" once a template has failed).
func (r *opsRenderer) run(t *template.Template) string {
	if r.err != nil {
		return ""
	}
	r.buf.Reset()
	if err := t.Execute(&r.buf, r.data); err != nil {
		r.err = err
		return ""
	}
	return r.buf.String()
}

// optional returns what t writes, or nil when its text is empty (the key
// is not set).
func (r *opsRenderer) optional(text string, t *template.Template) *string {
	if text == "" {
		return nil
	}
	return aws.String(r.run(t))
}

// truncateRunes returns s cut to at most limit characters.
func truncateRunes(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	n := 0
	for i := range s {
		if n == limit {
			return s[:i]
		}
		n++
	}
	return s
}
