package bigquerytest

import (
	"net/http"
	"slices"
	"strings"
)

// loadConfig is the configuration of a load job, as jobs.insert takes it.
type loadConfig struct {
	JobReference struct {
		ProjectID string `json:"projectId"`
		JobID     string `json:"jobId"`
		Location  string `json:"location"`
	} `json:"jobReference"`
	Configuration struct {
		Load *struct {
			DestinationTable struct {
				ProjectID string `json:"projectId"`
				DatasetID string `json:"datasetId"`
				TableID   string `json:"tableId"`
			} `json:"destinationTable"`
			SourceFormat        string   `json:"sourceFormat"`
			Autodetect          bool     `json:"autodetect"`
			WriteDisposition    string   `json:"writeDisposition"`
			CreateDisposition   string   `json:"createDisposition"`
			SchemaUpdateOptions []string `json:"schemaUpdateOptions"`
		} `json:"load"`
	} `json:"configuration"`
}

// insertJob is jobs.insert of a load job by multipart upload: it runs the
// load at once and shows the job RUNNING until its first jobs.get.
func (s *Server) insertJob(w http.ResponseWriter, r *http.Request, project string) {
	var c loadConfig
	rows, err := readUpload(r, &c)
	if err != nil {
		fail(w, http.StatusBadRequest, "invalid", "%v", err)
		return
	}
	l, ref := c.Configuration.Load, c.JobReference
	if l == nil || l.SourceFormat != "NEWLINE_DELIMITED_JSON" || ref.ProjectID != project || ref.JobID == "" {
		fail(w, http.StatusBadRequest, "invalid", "want a load job of NEWLINE_DELIMITED_JSON with a job reference of project %s", project)
		return
	}
	if _, dup := s.jobs[ref.JobID]; dup {
		fail(w, http.StatusConflict, "duplicate", "Already Exists: Job %s:%s.%s", project, ref.Location, ref.JobID)
		return
	}
	d := l.DestinationTable
	location, ok := s.datasets[d.ProjectID+":"+d.DatasetID]
	if !ok {
		fail(w, http.StatusNotFound, "notFound", "Not found: Dataset %s:%s", d.ProjectID, d.DatasetID)
		return
	}
	if !strings.EqualFold(ref.Location, location) {
		fail(w, http.StatusNotFound, "notFound", "Not found: Dataset %s:%s was not found in location %s", d.ProjectID, d.DatasetID, ref.Location)
		return
	}
	j := &job{ID: ref.JobID, Location: location, Err: s.load(d.ProjectID+":"+d.DatasetID+"."+d.TableID, l.Autodetect,
		l.CreateDisposition != "CREATE_NEVER", slices.Contains(l.SchemaUpdateOptions, "ALLOW_FIELD_ADDITION"), rows)}
	s.jobs[j.ID] = j
	answer(w, jobResource(project, j, "RUNNING"))
}

// load loads rows into the table named key, and returns the job's error.
func (s *Server) load(key string, autodetect, create, addFields bool, rows []map[string]any) *apiProblem {
	var detected []Field
	for _, row := range rows {
		f, _ := detect("", row)
		var err error
		if detected, err = merge(detected, f.Fields, ""); err != nil {
			return &apiProblem{Reason: "invalid", Message: "Error while reading data: " + err.Error()}
		}
	}
	t := s.tables[key]
	switch {
	case t == nil && !create:
		return &apiProblem{Reason: "notFound", Message: "Not found: Table " + key}
	case t == nil && !autodetect:
		return &apiProblem{Reason: "invalid", Message: "No schema specified on job or table."}
	case t == nil:
		t = &table{fields: detected, insertIDs: map[string]bool{}}
	case autodetect && addFields:
		fields, err := merge(append([]Field(nil), t.fields...), detected, "")
		if err != nil {
			return &apiProblem{Reason: "invalid", Message: "Provided Schema does not match Table " + key + ". " + err.Error()}
		}
		t.fields = fields
	}
	for _, row := range rows {
		if loc, msg := check(t.fields, row, ""); msg != "" {
			return &apiProblem{Reason: "invalid", Location: loc, Message: msg}
		}
	}
	s.tables[key] = t
	t.rows = append(t.rows, rows...)
	return nil
}

// getJob is jobs.get: a job is DONE once asked for.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request, project, id string) {
	j := s.jobs[id]
	if j == nil || !strings.EqualFold(r.URL.Query().Get("location"), j.Location) {
		fail(w, http.StatusNotFound, "notFound", "Not found: Job %s (location %q)", id, r.URL.Query().Get("location"))
		return
	}
	answer(w, jobResource(project, j, "DONE"))
}

// jobResource returns the job as the API shows it.
func jobResource(project string, j *job, state string) map[string]any {
	status := map[string]any{"state": state}
	if state == "DONE" && j.Err != nil {
		status["errorResult"] = j.Err
		status["errors"] = []*apiProblem{j.Err}
	}
	return map[string]any{"kind": "bigquery#job", "id": project + ":" + j.Location + "." + j.ID,
		"jobReference": map[string]string{"projectId": project, "jobId": j.ID, "location": j.Location}, "status": status}
}
