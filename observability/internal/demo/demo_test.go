package demo

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The program serves its metrics and its live view, with the publisher of
// "orders" waiting for "stalled", and Close ends every goroutine it
// started (goleak checks).
func TestProgramServesMetricsAndTheViewWithAStalledPublisher(t *testing.T) {
	p, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for path, want := range map[string]string{
		"/metrics":                  `fanout_watcher_publishers_waiting{broadcaster="orders",watcher="stalled",watcher_id="1"} 1`,
		"/debug/fanout?format=json": `"watcherName":"stalled"`,
	} {
		resp, err := http.Get("http://" + p.Addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || !strings.Contains(string(body), want) {
			t.Errorf("%s lacks %s (%v)", path, want, err)
		}
	}
}
