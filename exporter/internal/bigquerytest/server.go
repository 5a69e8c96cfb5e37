package bigquerytest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Server is the fake API on a loopback httptest server. Its methods are
// safe for concurrent use.
type Server struct {
	*httptest.Server
	auth tokens

	mu       sync.Mutex        // guards what follows
	datasets map[string]string // "project:dataset" -> location
	tables   map[string]*table // "project:dataset.table"
	jobs     map[string]*job   // job ID
	failures []failure
	calls    map[string]int // by kind: insertAll, load, dataset, jobs.get
}

// table is a table's schema, rows and the insert IDs seen.
type table struct {
	fields    []Field
	rows      []map[string]any
	insertIDs map[string]bool
}

// job is a load job: its ID, location and error.
type job struct {
	ID, Location string
	Err          *apiProblem
}

// failure is an injected failure of the next call of a kind.
type failure struct {
	kind, reason string
	status       int
}

// Start starts the fake; a cleanup registered with t stops it.
func Start(t testing.TB) *Server {
	s := &Server{datasets: map[string]string{}, tables: map[string]*table{}, jobs: map[string]*job{},
		calls: map[string]int{}}
	s.auth.issued = map[string]bool{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// FailNext makes the next call of kind (insertAll, load, dataset) fail
// with status and reason, as the API reports errors.
func (s *Server) FailNext(kind string, status int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, failure{kind: kind, status: status, reason: reason})
}

// CreateTable creates a dataset (in location US) and a table of it with
// the schema given.
func (s *Server) CreateTable(project, dataset, name string, fields []Field) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.datasets[project+":"+dataset] = "US"
	s.tables[project+":"+dataset+"."+name] = &table{fields: fields, insertIDs: map[string]bool{}}
}

// Rows returns the rows of a table, in the order stored (nil if there is
// no such table).
func (s *Server) Rows(project, dataset, name string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tables[project+":"+dataset+"."+name]; t != nil {
		return append([]map[string]any(nil), t.rows...)
	}
	return nil
}

// Schema returns the fields of a table.
func (s *Server) Schema(project, dataset, name string) []Field {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tables[project+":"+dataset+"."+name]; t != nil {
		return append([]Field(nil), t.fields...)
	}
	return nil
}

// DatasetLocation returns the location of a dataset, "" if there is none.
func (s *Server) DatasetLocation(project, dataset string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.datasets[project+":"+dataset]
}

// Calls returns how many calls of kind (insertAll, load, dataset,
// jobs.get) the fake answered.
func (s *Server) Calls(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[kind]
}

// apiProblem is an error as the API reports it.
type apiProblem struct {
	Reason   string `json:"reason"`
	Location string `json:"location,omitempty"`
	Message  string `json:"message"`
}

// fail answers an error, as the API does.
func fail(w http.ResponseWriter, status int, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": status, "message": msg,
		"errors": []apiProblem{{Reason: reason, Message: msg}}}})
}

// answer answers v as JSON.
func answer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(v)
}

// serve routes a request.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		s.auth.serveToken(w, r, s.URL+"/token")
		return
	}
	if !s.auth.valid(r.Header.Get("Authorization")) {
		fail(w, http.StatusUnauthorized, "authError", "Request is missing required authentication credential.")
		return
	}
	kind, p := route(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if kind == "" {
		fail(w, http.StatusNotFound, "notFound", "Not found: %s %s", r.Method, r.URL.Path)
		return
	}
	s.calls[kind]++
	if f, ok := s.takeFailure(kind); ok {
		fail(w, f.status, f.reason, "failing on purpose")
		return
	}
	switch kind {
	case "insertAll":
		s.insertAll(w, r, p)
	case "dataset":
		s.insertDataset(w, r, p[0])
	case "load":
		s.insertJob(w, r, p[0])
	case "jobs.get":
		s.getJob(w, r, p[0], p[1])
	}
}

// route returns the kind of call of r and the path's parameters.
func route(r *http.Request) (string, []string) {
	var p [4]string
	switch path := r.URL.Path; {
	case r.Method == http.MethodPost && scan(path, "/bigquery/v2/projects/%s/datasets/%s/tables/%s/insertAll", p[:3]):
		return "insertAll", p[:3]
	case r.Method == http.MethodPost && scan(path, "/bigquery/v2/projects/%s/datasets", p[:1]):
		return "dataset", p[:1]
	case r.Method == http.MethodPost && scan(path, "/upload/bigquery/v2/projects/%s/jobs", p[:1]) &&
		r.URL.Query().Get("uploadType") == "multipart":
		return "load", p[:1]
	case r.Method == http.MethodGet && scan(path, "/bigquery/v2/projects/%s/jobs/%s", p[:2]):
		return "jobs.get", p[:2]
	}
	return "", nil
}

// scan matches path against pattern, whose %s are path segments, and
// sets them in out.
func scan(path, pattern string, out []string) bool {
	ps, pp := strings.Split(path, "/"), strings.Split(pattern, "/")
	if len(ps) != len(pp) {
		return false
	}
	j := 0
	for i := range pp {
		switch {
		case pp[i] == "%s" && ps[i] != "":
			out[j] = ps[i]
			j++
		case pp[i] != ps[i]:
			return false
		}
	}
	return true
}

// takeFailure removes and returns the first failure injected for kind.
func (s *Server) takeFailure(kind string) (failure, bool) {
	for i, f := range s.failures {
		if f.kind == kind {
			s.failures = append(s.failures[:i], s.failures[i+1:]...)
			return f, true
		}
	}
	return failure{}, false
}

// insertAll is tabledata.insertAll.
func (s *Server) insertAll(w http.ResponseWriter, r *http.Request, p []string) {
	var req struct {
		SkipInvalidRows bool `json:"skipInvalidRows"`
		Rows            []struct {
			InsertID string         `json:"insertId"`
			JSON     map[string]any `json:"json"`
		} `json:"rows"`
	}
	if !decodeJSON(w, r, &req) {
		return
	}
	t := s.tables[p[0]+":"+p[1]+"."+p[2]]
	if t == nil {
		fail(w, http.StatusNotFound, "notFound", "Not found: Table %s:%s.%s", p[0], p[1], p[2])
		return
	}
	type rowError struct {
		Index  int          `json:"index"`
		Errors []apiProblem `json:"errors"`
	}
	var errs []rowError
	for i, row := range req.Rows {
		if loc, msg := check(t.fields, row.JSON, ""); msg != "" {
			errs = append(errs, rowError{Index: i, Errors: []apiProblem{{Reason: "invalid", Location: loc, Message: msg}}})
		}
	}
	if len(errs) > 0 && !req.SkipInvalidRows {
		bad := map[int]bool{}
		for _, e := range errs {
			bad[e.Index] = true
		}
		for i := range req.Rows {
			if !bad[i] {
				errs = append(errs, rowError{Index: i, Errors: []apiProblem{{Reason: "stopped"}}})
			}
		}
		answer(w, map[string]any{"kind": "bigquery#tableDataInsertAllResponse", "insertErrors": errs})
		return
	}
	for i, row := range req.Rows {
		if slices.ContainsFunc(errs, func(e rowError) bool { return e.Index == i }) || row.InsertID != "" && t.insertIDs[row.InsertID] {
			continue
		}
		t.insertIDs[row.InsertID] = row.InsertID != ""
		t.rows = append(t.rows, row.JSON)
	}
	answer(w, map[string]any{"kind": "bigquery#tableDataInsertAllResponse", "insertErrors": errs})
}

// insertDataset is datasets.insert.
func (s *Server) insertDataset(w http.ResponseWriter, r *http.Request, project string) {
	var req struct {
		DatasetReference struct{ ProjectID, DatasetID string } `json:"datasetReference"`
		Location         string                                `json:"location"`
	}
	if !decodeJSON(w, r, &req) {
		return
	}
	ref := req.DatasetReference
	if ref.ProjectID != project || ref.DatasetID == "" {
		fail(w, http.StatusBadRequest, "invalid", "Invalid dataset reference %s:%s", ref.ProjectID, ref.DatasetID)
		return
	}
	key := project + ":" + ref.DatasetID
	if _, ok := s.datasets[key]; ok {
		fail(w, http.StatusConflict, "duplicate", "Already Exists: Dataset %s", key)
		return
	}
	s.datasets[key] = strings.ToUpper(req.Location)
	if s.datasets[key] == "" {
		s.datasets[key] = "US"
	}
	answer(w, map[string]any{"kind": "bigquery#dataset", "id": key, "location": s.datasets[key]})
}

// decodeJSON decodes r's JSON body into v, or answers 400.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		fail(w, http.StatusBadRequest, "invalid", "Content-Type %q, want application/json", r.Header.Get("Content-Type"))
		return false
	}
	d := json.NewDecoder(r.Body)
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		fail(w, http.StatusBadRequest, "parseError", "Parse Error: %v", err)
		return false
	}
	return true
}

// readUpload reads a multipart/related upload: its JSON metadata into
// meta and its data, JSON lines, as rows.
func readUpload(r *http.Request, meta any) ([]map[string]any, error) {
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "multipart/related" {
		return nil, fmt.Errorf("Content-Type %q, want multipart/related", r.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	part, err := mr.NextPart()
	if err != nil || !strings.HasPrefix(part.Header.Get("Content-Type"), "application/json") {
		return nil, fmt.Errorf("the first part is not JSON metadata: %v", err)
	}
	if err := json.NewDecoder(part).Decode(meta); err != nil {
		return nil, err
	}
	if part, err = mr.NextPart(); err != nil {
		return nil, fmt.Errorf("no data part: %w", err)
	}
	var rows []map[string]any
	sc := bufio.NewScanner(part)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		d := json.NewDecoder(strings.NewReader(sc.Text()))
		d.UseNumber()
		var row map[string]any
		if err := d.Decode(&row); err != nil {
			return nil, fmt.Errorf("data line %q: %w", sc.Text(), err)
		}
		rows = append(rows, row)
	}
	_, _ = io.Copy(io.Discard, r.Body)
	return rows, sc.Err()
}
