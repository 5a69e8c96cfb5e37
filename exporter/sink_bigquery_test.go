package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanout-go/fanout/exporter/internal/bigquerytest"
)

// bigQueryReceiver builds the sink of a receiver of table p:d.events on
// the fake, authenticated with a service account key of its, with more
// keys of its bigquery key (", key: value" each). Writes are not spaced
// (interval_seconds, see TestBigQuerySpacesWritesByIntervalSeconds).
func bigQueryReceiver(t *testing.T, srv *bigquerytest.Server, more string) Sink {
	t.Helper()
	key := srv.ServiceAccountKey(t, "exporter@p.iam.gserviceaccount.com")
	c := parseOK(t, fmt.Sprintf("receivers:\n  - name: bq\n    bigquery: {location: EU, project: p, dataset: d, table: events, "+
		"credentials_path: %s, endpoint: %s%s}\n", key, srv.URL, more))
	c.Receivers[0].BigQuery.interval = time.Nanosecond
	s, err := c.Receivers[0].build("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// labelled returns occurrence uid/1 whose involved object has labels.
func labelled(uid string, labels map[string]string) *Occurrence {
	o := occ(uid, 1, "ns")
	o.object = &ObjectMeta{Labels: labels}
	return o
}

// A table that does not exist is made as kubernetes-event-exporter makes
// it — dataset created in its location, a load job with the schema
// autodetected — and later rows are streamed (insertAll). Rows are the
// records with nulls and empty objects left out and keys made column
// names.
func TestBigQueryCreatesTheTableAsTheyDoThenStreamsRows(t *testing.T) {
	srv := bigquerytest.Start(t)
	s := bigQueryReceiver(t, srv, "")
	if n, err := s.Write(t.Context(), []*Occurrence{labelled("a", map[string]string{"app.kubernetes.io/name": "web"}), occ("b", 1, "ns")}); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	if n, err := s.Write(t.Context(), []*Occurrence{occ("c", 1, "ns")}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	rows := srv.Rows("p", "d", "events")
	if len(rows) != 3 || srv.DatasetLocation("p", "d") != "EU" || srv.Calls("load") != 1 || srv.Calls("insertAll") != 2 {
		t.Fatalf("%d rows, dataset in %q, %d loads, %d insertAll; want 3 rows, EU, 1 load then insertAll",
			len(rows), srv.DatasetLocation("p", "d"), srv.Calls("load"), srv.Calls("insertAll"))
	}
	obj := rows[0]["involvedObject"].(map[string]any)
	meta := rows[0]["metadata"].(map[string]any)
	if obj["labels"].(map[string]any)["app_kubernetes_io_name"] != "web" || rows[0]["reason"] != "Test" {
		t.Errorf("row %v: want the label as app_kubernetes_io_name", rows[0])
	}
	if _, ok := meta["creationTimestamp"]; ok {
		t.Errorf("metadata %v: a null creationTimestamp must be left out", meta)
	}
	if _, ok := rows[1]["source"]; ok {
		t.Errorf("row %v: an empty source must be left out", rows[1])
	}
}

// A row with a field the table lacks (a new label) goes in a load job
// that adds the field, as kubernetes-event-exporter's loads do.
func TestBigQueryAddsTheFieldsOfANewRowWithALoadJob(t *testing.T) {
	srv := bigquerytest.Start(t)
	s := bigQueryReceiver(t, srv, "")
	for _, o := range []*Occurrence{occ("a", 1, "ns"), labelled("b", map[string]string{"team": "x"}), occ("c", 1, "ns")} {
		if n, err := s.Write(t.Context(), []*Occurrence{o}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	}
	schema, _ := json.Marshal(srv.Schema("p", "d", "events"))
	if len(srv.Rows("p", "d", "events")) != 3 || srv.Calls("load") != 2 || !strings.Contains(string(schema), `"name":"team"`) {
		t.Errorf("%d rows after %d loads, schema %s; want 3 rows, 2 loads, a team column", len(srv.Rows("p", "d", "events")),
			srv.Calls("load"), schema)
	}
}

// numberRecords makes record {"n": 1}, or {"n": "x"} for uid bad.
func numberRecords(o *Occurrence) ([]byte, error) {
	if o.UID == "bad" {
		return []byte(`{"n":"x"}`), nil
	}
	return []byte(`{"n":1}`), nil
}

// A row the table refuses is dropped after the rows before it are stored:
// insertAll stores none of a request with a refused row.
func TestBigQueryRefusedRowIsPermanentAfterTheRowsBeforeIt(t *testing.T) {
	srv := bigquerytest.Start(t)
	srv.CreateTable("p", "d", "events", []bigquerytest.Field{{Name: "n", Type: "INTEGER", Mode: "NULLABLE"}})
	s := built(NewBigQuerySink(BigQueryConfig{Project: "p", Dataset: "d", Table: "events", Endpoint: srv.URL,
		CredentialsPath: srv.ServiceAccountKey(t, "e@p"), Encode: numberRecords, interval: time.Nanosecond}))(t)
	n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns"), occ("b", 1, "ns"), occ("bad", 1, "ns"), occ("c", 1, "ns")})
	if n != 2 || !IsPermanent(err) || !strings.Contains(err.Error(), "bad/1") || len(srv.Rows("p", "d", "events")) != 2 {
		t.Errorf("n %d, err %v, %d rows; want 2 stored and a permanent error about bad/1", n, err, len(srv.Rows("p", "d", "events")))
	}
}

// A load job that fails for its data is halved: the first half is
// written, and the row at fault is dropped alone.
func TestBigQueryInvalidLoadIsHalvedToTheRowAtFault(t *testing.T) {
	srv := bigquerytest.Start(t)
	s := built(NewBigQuerySink(BigQueryConfig{Project: "p", Dataset: "d", Table: "events", Endpoint: srv.URL,
		CredentialsPath: srv.ServiceAccountKey(t, "e@p"), Encode: numberRecords, interval: time.Nanosecond}))(t)
	n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns"), occ("bad", 1, "ns")})
	if n != 1 || err != nil {
		t.Fatalf("n %d, err %v; want the first half written", n, err)
	}
	n, err = s.Write(t.Context(), []*Occurrence{occ("bad", 1, "ns")})
	if wantFailure(t, "the row at fault", n, err, true); len(srv.Rows("p", "d", "events")) != 1 {
		t.Errorf("%d rows, want 1", len(srv.Rows("p", "d", "events")))
	}
}

func TestBigQueryErrorsAreRetryableOrPermanentByStatusAndReason(t *testing.T) {
	srv := bigquerytest.Start(t)
	s := bigQueryReceiver(t, srv, "")
	for _, c := range []struct {
		status    int
		reason    string
		permanent bool
	}{{503, "backendError", false}, {500, "internalError", false}, {403, "rateLimitExceeded", false},
		{403, "quotaExceeded", false}, {403, "accessDenied", true}, {400, "invalid", true}} {
		srv.FailNext("insertAll", c.status, c.reason)
		n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
		wantFailure(t, fmt.Sprint(c.status, " ", c.reason), n, err, c.permanent)
	}
	srv.FailNext("dataset", http.StatusServiceUnavailable, "backendError")
	n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")}) // no table: the dataset is created first
	wantFailure(t, "dataset creation", n, err, false)
}

func TestBigQueryConcurrentWritesStoreEveryRow(t *testing.T) {
	srv := bigquerytest.Start(t)
	s := bigQueryReceiver(t, srv, "")
	if n, err := s.Write(t.Context(), []*Occurrence{occ("first", 1, "ns")}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 5 {
				if n, err := s.Write(context.Background(), []*Occurrence{occ(fmt.Sprint(w, "-", i), 1, "ns")}); n != 1 || err != nil {
					t.Error(n, err)
				}
			}
		})
	}
	wg.Wait()
	if rows := srv.Rows("p", "d", "events"); len(rows) != 21 {
		t.Errorf("%d rows, want 21", len(rows))
	}
}

// A write of fewer rows than a batch starts interval_seconds after the
// previous write, as theirs writes what it has every interval; a full
// batch is written at once, as theirs writes a batch as soon as it is
// full (so the sink is not capped at a batch per interval). A write
// waiting for its turn returns when its context ends.
func TestBigQueryWritesFullBatchesAtOnceAndSpacesTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &BigQuerySink{cfg: BigQueryConfig{interval: 10 * time.Second, full: 3, BatchSize: 1000}}
		start := time.Now()
		for _, n := range []int{3, 3, 3, 1, 3, 2, 1} {
			if err := s.wait(t.Context(), n); err != nil {
				t.Fatal(err)
			}
		}
		// The three full ones at once; the 1 waits for the interval
		// after the last of them (10s); the full one after it goes at
		// once; the 2 and the last 1 wait 10s each.
		if d := time.Since(start); d != 30*time.Second {
			t.Errorf("the writes took %v, want 30s", d)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := s.wait(ctx, 1); err == nil {
			t.Error("a wait past its context's end succeeded")
		}
		if err := s.wait(ctx, 3); err != nil {
			t.Errorf("a full batch waited: %v", err)
		}
	})
}

// Their keys batch_size and max_retries set the receiver's batch and
// tries unless it sets its own (and the receiver's batch is what the
// sink writes at once, see wait); their example without values is refused,
// as they refuse it at start.
func TestBigQueryTheirKeysSetBatchAndRetries(t *testing.T) {
	c := parseOK(t, "receivers:\n  - {name: a, bigquery: {project: p, dataset: d, table: t, batch_size: 50, max_retries: 5}}\n"+
		"  - {name: b, batch: 7, retry: {maxTries: 2}, bigquery: {project: p, dataset: d, table: t, batch_size: 50, max_retries: 5}}\n"+
		"  - {name: c, bigquery: {project: p, dataset: d, table: t}}\n")
	got := [][3]int{}
	for _, r := range c.Receivers { // the sink's full batch is the receiver's batch
		got = append(got, [3]int{r.Batch, r.Retry.MaxTries, r.BigQuery.full})
	}
	if want := [][3]int{{50, 6, 50}, {7, 2, 7}, {1000, 4, 1000}}; !slices.Equal(got, want) || len(otherWarnings(c.Warnings)) != 0 {
		t.Errorf("batch, tries and full batch %v, want %v; warnings %q", got, want, c.Warnings)
	}
	_, err := LoadConfig(theirs + "20-bigquery.yaml")
	for _, key := range []string{"project", "dataset", "table"} {
		if err == nil || !strings.Contains(err.Error(), "bigquery."+key+" is required") {
			t.Errorf("their example: err %v, want bigquery.%s is required", err, key)
		}
	}
	wantConfigErrors(t, map[string]string{
		"bigquery: {project: p, dataset: d, table: t, batch_size: -1}":      "bigquery.batch_size -1 is negative",
		"bigquery: {project: p, dataset: d, table: t, endpoint: 'ftp://x'}": `bigquery.endpoint "ftp://x"`,
	})
}
