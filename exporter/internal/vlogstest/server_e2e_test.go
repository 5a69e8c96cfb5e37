//go:build e2e

package vlogstest

import (
	"net/http"
	"strings"
	"testing"
)

// Persist is what lets a crash test count on the server: what it wrote is
// found after a SIGKILL and a restart on the same port and data.
func TestPersistedEntriesSurviveAKillAndRestart(t *testing.T) {
	s := Start(t)
	push := `{"streams": [{"stream": {"job": "a"}, "values": [["1795780800000000001", "{\"n\":1}"], ["1795780800000000002", "two"]]}]}`
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Post(s.PushURL(), "application/json", strings.NewReader(push))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("push answered %s", resp.Status)
	}
	if err := s.Persist(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if _, err := s.Query(t.Context(), "", "*"); err == nil {
		t.Fatal("a killed server answered a query")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Query(t.Context(), "", "* | sort by (_time)")
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{"_msg": `{"n":1}`, "_time": "2026-11-27T12:00:00.000000001Z", "_stream": `{job="a"}`, "job": "a"},
		{"_msg": "two", "_time": "2026-11-27T12:00:00.000000002Z", "_stream": `{job="a"}`, "job": "a"},
	}
	if len(got) != len(want) {
		t.Fatalf("found %v, want %v", got, want)
	}
	for i, w := range want {
		for k, v := range w {
			if got[i][k] != v {
				t.Errorf("entry %d: %s = %q, want %q (entry %v)", i, k, got[i][k], v, got[i])
			}
		}
	}
}
