package exporter

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"time"
)

// This file holds the BigQuery sink's calls of the REST API: insertAll,
// datasets.insert, a load job (a multipart upload) and its status.

// insertAllRow is a row of an insertAll request.
type insertAllRow struct {
	InsertID string         `json:"insertId"`
	JSON     map[string]any `json:"json"`
}

// insertAllResponse is the answer to an insertAll request: the rows
// refused, if any, each with why.
type insertAllResponse struct {
	InsertErrors []struct {
		Index  int               `json:"index"`
		Errors []bigQueryProblem `json:"errors"`
	} `json:"insertErrors"`
}

// bigQueryProblem is an error of the API: why (reason) and what.
type bigQueryProblem struct {
	Reason   string `json:"reason"`
	Location string `json:"location"`
	Message  string `json:"message"`
}

func (p bigQueryProblem) String() string {
	if p.Location != "" {
		return fmt.Sprintf("%s (%s, at %s)", p.Message, p.Reason, p.Location)
	}
	return fmt.Sprintf("%s (%s)", p.Message, p.Reason)
}

// bigQueryRetryable are the reasons of errors that may go away.
var bigQueryRetryable = []string{"backendError", "internalError", "rateLimitExceeded", "quotaExceeded",
	"jobBackendError", "jobInternalError", "timeout"}

// errNotFound marks an API answer 404: the table or dataset is missing.
var errNotFound = errors.New("not found")

// insert streams the rows with insertAll; see [BigQuerySink].
func (s *BigQuerySink) insert(ctx context.Context, batch []*Occurrence, rows []map[string]any) (int, error) {
	req := struct {
		Kind string         `json:"kind"`
		Rows []insertAllRow `json:"rows"`
	}{Kind: "bigquery#tableDataInsertAllRequest"}
	for i, row := range rows {
		req.Rows = append(req.Rows, insertAllRow{InsertID: batch[i].Key(), JSON: row})
	}
	body, _ := json.Marshal(req)
	var ans insertAllResponse
	err := s.call(ctx, http.MethodPost, s.apiURL(false, "/projects/%s/datasets/%s/tables/%s/insertAll",
		s.cfg.Project, s.cfg.Dataset, s.cfg.Table), "application/json", body, &ans)
	switch {
	case errors.Is(err, errNotFound):
		return s.load(ctx, batch, rows)
	case halvable(err, batch):
		return s.insert(ctx, batch[:len(batch)/2], rows[:len(batch)/2])
	case err != nil:
		return 0, err
	case len(ans.InsertErrors) == 0:
		return len(batch), nil
	}
	return s.refused(ctx, batch, rows, ans)
}

// refused handles an insertAll that stored nothing because of the rows of
// ans: a field the table lacks makes the batch a load job, which adds it;
// otherwise the rows before the first refused are inserted again, and it
// is [Permanent].
func (s *BigQuerySink) refused(ctx context.Context, batch []*Occurrence, rows []map[string]any, ans insertAllResponse) (int, error) {
	first, why := len(batch), ""
	for _, e := range ans.InsertErrors {
		for _, p := range e.Errors {
			if strings.HasPrefix(p.Message, "no such field") {
				return s.load(ctx, batch, rows)
			}
			if p.Reason != "stopped" && e.Index >= 0 && e.Index < first {
				first, why = e.Index, p.String()
			}
		}
	}
	if first == len(batch) {
		return 0, errors.New("insertAll: every row stopped, none refused")
	}
	if first > 0 {
		if n, err := s.insert(ctx, batch[:first], rows[:first]); err != nil {
			return n, err
		}
	}
	return first, Permanent(fmt.Errorf("occurrence %s: row refused: %s", batch[first].Key(), why))
}

// load writes the rows with a load job, creating the dataset first. A job
// that fails for its data is [Permanent] for a single row; a batch of
// several is halved (its first half written alone), to find the row.
func (s *BigQuerySink) load(ctx context.Context, batch []*Occurrence, rows []map[string]any) (int, error) {
	err := s.createDataset(ctx)
	if err == nil {
		err = s.runLoad(ctx, rows)
	}
	switch {
	case err == nil:
		return len(batch), nil
	case errors.Is(err, errInvalidLoad) && len(batch) > 1:
		return s.load(ctx, batch[:len(batch)/2], rows[:len(batch)/2])
	case IsPermanent(err):
		return 0, Permanent(fmt.Errorf("occurrence %s: %w", batch[0].Key(), err))
	}
	return 0, err
}

// createDataset creates the dataset in the configured location; one that
// exists is fine.
func (s *BigQuerySink) createDataset(ctx context.Context) error {
	body, _ := json.Marshal(map[string]any{"location": s.cfg.Location,
		"datasetReference": map[string]string{"projectId": s.cfg.Project, "datasetId": s.cfg.Dataset}})
	err := s.call(ctx, http.MethodPost, s.apiURL(false, "/projects/%s/datasets", s.cfg.Project), "application/json", body, nil)
	if err != nil && !errors.Is(err, errExists) {
		return fmt.Errorf("create dataset: %w", err)
	}
	return nil
}

// errInvalidLoad marks a load job that failed for its data.
var errInvalidLoad = errors.New("invalid data")

// errExists marks an API answer 409: what is created exists.
var errExists = errors.New("already exists")

// bigQueryJob is a job as the API shows it.
type bigQueryJob struct {
	JobReference struct {
		JobID    string `json:"jobId"`
		Location string `json:"location"`
	} `json:"jobReference"`
	Status struct {
		State       string           `json:"state"`
		ErrorResult *bigQueryProblem `json:"errorResult"`
	} `json:"status"`
}

// runLoad uploads the rows as a load job and waits until it is done.
func (s *BigQuerySink) runLoad(ctx context.Context, rows []map[string]any) error {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	meta := map[string]any{
		"jobReference": map[string]string{"projectId": s.cfg.Project, "jobId": "fanout_eventer_" + hex.EncodeToString(id),
			"location": s.cfg.Location},
		"configuration": map[string]any{"load": map[string]any{
			"destinationTable": map[string]string{"projectId": s.cfg.Project, "datasetId": s.cfg.Dataset, "tableId": s.cfg.Table},
			"sourceFormat":     "NEWLINE_DELIMITED_JSON", "autodetect": true, "writeDisposition": "WRITE_APPEND",
			"createDisposition": "CREATE_IF_NEEDED", "schemaUpdateOptions": []string{"ALLOW_FIELD_ADDITION"}}},
	}
	body, contentType := loadUpload(meta, rows)
	var job bigQueryJob
	err := s.call(ctx, http.MethodPost, s.apiURL(true, "/projects/%s/jobs", s.cfg.Project)+"?uploadType=multipart",
		contentType, body, &job)
	if err != nil {
		return fmt.Errorf("load job: %w", err)
	}
	return s.waitJob(ctx, job)
}

// loadUpload returns the multipart/related body of a load job: its
// configuration, then the rows as JSON lines.
func loadUpload(meta map[string]any, rows []map[string]any) ([]byte, string) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	part, _ := w.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/json; charset=UTF-8"}})
	_ = json.NewEncoder(part).Encode(meta)
	part, _ = w.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/octet-stream"}})
	enc := json.NewEncoder(part)
	for _, row := range rows {
		_ = enc.Encode(row)
	}
	_ = w.Close()
	return buf.Bytes(), "multipart/related; boundary=" + w.Boundary()
}

// waitJob polls the job until it is done, within timeout_seconds; a job
// that failed for invalid data is [Permanent].
func (s *BigQuerySink) waitJob(ctx context.Context, job bigQueryJob) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.TimeoutSeconds)*time.Second)
	defer cancel()
	id := job.JobReference.JobID
	for pause := 250 * time.Millisecond; job.Status.State != "DONE"; pause = min(2*pause, 5*time.Second) {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("load job %s: not done: %w", id, ctx.Err())
		case <-t.C:
		}
		u := s.apiURL(false, "/projects/%s/jobs/%s", s.cfg.Project, id) + "?location=" + job.JobReference.Location
		if err := s.call(ctx, http.MethodGet, u, "", nil, &job); err != nil {
			return fmt.Errorf("load job %s: %w", id, err)
		}
	}
	if p := job.Status.ErrorResult; p != nil {
		if slices.Contains(bigQueryRetryable, p.Reason) {
			return fmt.Errorf("load job %s: %s", id, p)
		}
		return Permanent(fmt.Errorf("load job %s: %w: %s", id, errInvalidLoad, p))
	}
	return nil
}

// call sends a request of the API with body (a POST) or without (a GET),
// and decodes the JSON answer into out (nil: not read). The error of an
// answer that is not 2xx says why (see bigQueryStatusError).
func (s *BigQuerySink) call(ctx context.Context, method, url, contentType string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return Permanent(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	answer := readAnswer(resp, 4<<20)
	if resp.StatusCode/100 != 2 {
		return bigQueryStatusError(resp, answer)
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return fmt.Errorf("%s: %w", resp.Request.URL.Path, err)
		}
	}
	return nil
}

// bigQueryStatusError returns the error of an answer that is not 2xx:
// [errNotFound] for a 404, [errExists] for a 409, retryable for 408, 429,
// 5xx and a retryable reason (rate or quota exceeded), [errTooLarge] for a
// request too large, else [Permanent].
func bigQueryStatusError(resp *http.Response, body []byte) error {
	var e struct {
		Error struct {
			Message string            `json:"message"`
			Errors  []bigQueryProblem `json:"errors"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	msg, reason := string(snippet(body)), ""
	if e.Error.Message != "" {
		msg = e.Error.Message
	}
	if len(e.Error.Errors) > 0 {
		reason = e.Error.Errors[0].Reason
	}
	err := fmt.Errorf("%s %s: %s: %s (%s)", resp.Request.Method, resp.Request.URL.Path, resp.Status, msg, reason)
	switch code := resp.StatusCode; {
	case code == http.StatusNotFound:
		return fmt.Errorf("%w: %w", errNotFound, err)
	case code == http.StatusConflict:
		return fmt.Errorf("%w: %w", errExists, err)
	case code == http.StatusRequestEntityTooLarge || strings.Contains(msg, "payload size exceeds"):
		return Permanent(fmt.Errorf("%w: %w", errTooLarge, err))
	case retryableStatus(code) || slices.Contains(bigQueryRetryable, reason):
		return err
	}
	return Permanent(err)
}
