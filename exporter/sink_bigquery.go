package exporter

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// BigQueryConfig configures a bigquery receiver, with
// kubernetes-event-exporter's keys (and endpoint and the record's layout):
// each occurrence is one row of a table, streamed with the insertAll API,
// the table created or widened as kubernetes-event-exporter does (see
// [BigQuerySink]).
type BigQueryConfig struct {
	// Location is the dataset's location when the sink creates it
	// (default US).
	Location string `yaml:"location"`
	// Project, Dataset and Table name the table (required).
	Project string `yaml:"project"`
	Dataset string `yaml:"dataset"`
	Table   string `yaml:"table"`
	// CredentialsPath is a service account key (JSON); without it, the
	// application default credentials are used.
	CredentialsPath string `yaml:"credentials_path"`
	// BatchSize is the most rows per write (default 1000), unless the
	// receiver's batch is set: it is the receiver's batch.
	BatchSize int `yaml:"batch_size"`
	// MaxRetries is how often a failed write is retried (default 3),
	// unless the receiver's retry sets maxTries: maxTries is MaxRetries+1.
	MaxRetries int `yaml:"max_retries"`
	// IntervalSeconds is how long a write of fewer rows than a batch
	// waits after the start of the previous write (default 10 s); a full
	// batch is written at once. So kubernetes-event-exporter writes: a
	// batch as soon as it is full, what it has every interval.
	IntervalSeconds int `yaml:"interval_seconds"`
	// TimeoutSeconds bounds each request, and the wait for a load job
	// (default 60 s).
	TimeoutSeconds int `yaml:"timeout_seconds"`
	// Endpoint is the API's base URL (default
	// https://bigquery.googleapis.com).
	Endpoint string `yaml:"endpoint"`
	// Payload is the layout and deDot of the records, each made a row.
	Payload `yaml:",inline"`
	// Encode makes each record; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`

	interval time.Duration // IntervalSeconds, or less in tests
	full     int           // the receiver's batch (applyTo); 0: BatchSize
}

// bigQueryScope is the OAuth scope of the API.
const bigQueryScope = "https://www.googleapis.com/auth/bigquery"

func (c *BigQueryConfig) validate() []string {
	var p []string
	for key, v := range map[string]string{"project": c.Project, "dataset": c.Dataset, "table": c.Table} {
		if v == "" {
			p = append(p, "bigquery."+key+" is required (kubernetes-event-exporter does not start without it either)")
		}
	}
	for key, v := range map[string]int{"batch_size": c.BatchSize, "max_retries": c.MaxRetries,
		"interval_seconds": c.IntervalSeconds, "timeout_seconds": c.TimeoutSeconds} {
		if v < 0 {
			p = append(p, fmt.Sprintf("bigquery.%s %d is negative", key, v))
		}
	}
	c.Location = cmp.Or(c.Location, "US")
	c.BatchSize, c.MaxRetries = cmp.Or(c.BatchSize, 1000), cmp.Or(c.MaxRetries, 3)
	c.IntervalSeconds, c.TimeoutSeconds = cmp.Or(c.IntervalSeconds, 10), cmp.Or(c.TimeoutSeconds, 60)
	if c.interval == 0 {
		c.interval = time.Duration(c.IntervalSeconds) * time.Second
	}
	c.Endpoint = strings.TrimSuffix(cmp.Or(c.Endpoint, "https://bigquery.googleapis.com"), "/")
	p = appendProblem(p, httpURLProblem("bigquery.endpoint", c.Endpoint))
	slices.Sort(p)
	return p
}

// applyTo sets the receiver's batch and tries from batch_size and
// max_retries (their defaults, 1000 and 3, included), where the receiver
// does not set its own.
func (c *BigQueryConfig) applyTo(r *Receiver) {
	if r.Batch == 0 && c.BatchSize >= 0 {
		r.Batch = cmp.Or(c.BatchSize, 1000)
	}
	c.full = r.Batch
	if c.MaxRetries >= 0 && (r.RetryConfig == nil || r.RetryConfig.MaxTries == nil) {
		rc := RetryConfig{}
		if r.RetryConfig != nil {
			rc = *r.RetryConfig
		}
		rc.MaxTries = new(cmp.Or(c.MaxRetries, 3) + 1)
		r.RetryConfig = &rc
	}
}

// BigQuerySink writes occurrences as rows of a BigQuery table. Each record
// is made a row as kubernetes-event-exporter makes it: null values left
// out, keys made column names (a character other than a letter or digit
// becomes _, and a key not starting with a letter gains a leading _);
// unlike theirs, empty objects are left out too (BigQuery cannot store an
// empty record) and keys in lists are renamed as well.
//
// Rows are streamed with tabledata.insertAll, each with its occurrence's
// key as insertId (BigQuery drops a retried row it has just stored).
// When the table or dataset does not exist, or a row has a field the table
// lacks, the write is a load job instead, kubernetes-event-exporter's
// way: autodetected schema, fields added (ALLOW_FIELD_ADDITION), the
// dataset created first. A row BigQuery refuses is [Permanent], after the
// rows before it are stored; so is a load job's invalid data (a batch of
// several is halved to find the row). 5xx, 429, rate and quota errors and
// transport errors are retried. Write is safe for concurrent use.
type BigQuerySink struct {
	cfg    BigQueryConfig
	client *http.Client
	table  string // project:dataset.table, for messages

	mu   sync.Mutex // guards next
	next time.Time  // the earliest start of the next write
}

// NewBigQuerySink returns a BigQuery sink. It reads the credentials now
// and sends nothing until the first write.
func NewBigQuerySink(cfg BigQueryConfig) (*BigQuerySink, error) {
	if p := cfg.validate(); len(p) > 0 {
		return nil, errors.New(p[0])
	}
	creds, err := bigQueryCredentials(cfg.CredentialsPath)
	if err != nil {
		return nil, fmt.Errorf("bigquery: %w", err)
	}
	tr, _ := httpTransport("bigquery", nil)
	client := &http.Client{Transport: &oauth2.Transport{Source: creds.TokenSource, Base: tr},
		Timeout: time.Duration(cfg.TimeoutSeconds) * time.Second}
	return &BigQuerySink{cfg: cfg, client: client, table: cfg.Project + ":" + cfg.Dataset + "." + cfg.Table}, nil
}

// bigQueryCredentials reads a service account key, or finds the
// application default credentials without one.
func bigQueryCredentials(path string) (*google.Credentials, error) {
	if path == "" {
		return google.FindDefaultCredentials(context.Background(), bigQueryScope)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials_path: %w", err)
	}
	creds, err := google.CredentialsFromJSONWithType(context.Background(), b, google.ServiceAccount, bigQueryScope)
	if err != nil {
		return nil, fmt.Errorf("credentials_path %s: %w", path, err)
	}
	return creds, nil
}

// Write stores the batch; an occurrence that cannot be encoded ends the
// batch there (the rows before are written).
func (s *BigQuerySink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	if err := s.wait(ctx, len(batch)); err != nil {
		return 0, err
	}
	rows := make([]map[string]any, 0, len(batch))
	n, encErr := encodeEach(batch, s.cfg.Encode, func(_ int, _ *Occurrence, rec []byte) {
		rows = append(rows, bigQueryRow(rec))
	})
	for i := range rows {
		if rows[i] == nil {
			n, encErr = i, Permanent(fmt.Errorf("occurrence %s: the record is not a JSON object", batch[i].Key()))
			break
		}
	}
	if n == 0 {
		return 0, encErr
	}
	stored, err := s.insert(ctx, batch[:n], rows[:n])
	if err != nil {
		return stored, fmt.Errorf("bigquery %s: %w", s.table, err)
	}
	if stored < n { // a halved write: the receiver writes the rest next
		return stored, nil
	}
	return n, encErr
}

// wait waits until the turn of a write of n rows: a full batch's at once,
// a smaller one's IntervalSeconds after the start of the previous write.
// Spacing every write by the interval would cap the sink at a batch per
// interval (1,000 rows in 10 s by default), where theirs keeps up.
func (s *BigQuerySink) wait(ctx context.Context, n int) error {
	s.mu.Lock()
	now := time.Now()
	start := now
	if n < cmp.Or(s.cfg.full, s.cfg.BatchSize) && s.next.After(now) {
		start = s.next
	}
	s.next = start.Add(s.cfg.interval)
	s.mu.Unlock()
	if start == now {
		return nil
	}
	t := time.NewTimer(start.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// bigQueryRow returns the row of a JSON record, or nil if it is not an
// object.
func bigQueryRow(rec []byte) map[string]any {
	d := json.NewDecoder(bytes.NewReader(rec))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil || m == nil {
		return nil
	}
	if row, ok := cleanValue(m).(map[string]any); ok {
		return row
	}
	return map[string]any{} // every value null: a row of nulls

}

// cleanValue returns v with nulls and empty objects left out and keys
// made column names, in objects and lists.
func cleanValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if x = cleanValue(x); x != nil {
				out[bigQueryColumn(k)] = x
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		out := make([]any, 0, len(v))
		for _, x := range v {
			if x = cleanValue(x); x != nil {
				out = append(out, x)
			}
		}
		return out
	}
	return v
}

// bigQueryColumn makes key a column name as kubernetes-event-exporter
// does.
func bigQueryColumn(key string) string {
	var b strings.Builder
	if key == "" || !unicode.IsLetter(rune(key[0])) {
		b.WriteByte('_')
	}
	for _, r := range key {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// apiURL returns the URL of path under the API's base (upload: the
// upload API's).
func (s *BigQuerySink) apiURL(upload bool, path string, args ...any) string {
	for i, a := range args {
		args[i] = url.PathEscape(fmt.Sprint(a))
	}
	prefix := "/bigquery/v2"
	if upload {
		prefix = "/upload/bigquery/v2"
	}
	return s.cfg.Endpoint + prefix + fmt.Sprintf(path, args...)
}

// Close closes idle connections.
func (s *BigQuerySink) Close(context.Context) error {
	s.client.CloseIdleConnections()
	return nil
}
