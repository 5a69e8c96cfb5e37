//go:build e2e

package observability_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/fanout-go/fanout/observability/internal/chromiumtest"
	"github.com/fanout-go/fanout/observability/internal/demo"
)

// screenshot, if set, is where the browser test writes its screenshot of
// the live view (the README's: -screenshot ../debug/liveview.png).
var screenshot = flag.String("screenshot", "", "write the live view's screenshot to this PNG file")

// viewPath is where the demo serves the live view.
const viewPath = "/debug/fanout"

// browser starts a headless Chromium that resolves no name but loopback's,
// closed when t ends, and returns a tab's context and what the tab
// requested and threw.
func browser(t *testing.T) (context.Context, *tabLog) {
	t.Helper()
	bin, err := chromiumtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 860),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc()
	})
	log := &tabLog{}
	if err := chromedp.Listen(ctx, log.note); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	return ctx, log
}

// tabLog is what a tab requested, and the exceptions it threw and the
// messages its console showed (a CSP violation among them).
type tabLog struct {
	mu       sync.Mutex
	requests []string
	problems []string
}

func (l *tabLog) note(ev any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		l.requests = append(l.requests, ev.Request.URL)
	case *runtime.EventExceptionThrown:
		l.problems = append(l.problems, "exception: "+ev.ExceptionDetails.Text)
	case *runtime.EventConsoleAPICalled:
		l.problems = append(l.problems, fmt.Sprintf("console.%s", ev.Type))
	}
}

func (l *tabLog) snapshot() (requests, problems []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.requests), slices.Clone(l.problems)
}

// pageState is what the test reads of the page at one moment.
type pageState struct {
	Updates     int    `json:"updates"`
	Marker      int    `json:"marker"`
	Navigations int    `json:"navigations"`
	BlockedBy   string `json:"blockedBy"`
	Alert       string `json:"alert"`
	FirstRow    string `json:"firstRow"`
	FirstName   string `json:"firstName"`
	Blocking    bool   `json:"blocking"`
	Waited      string `json:"waited"`
	Accepted    string `json:"accepted"`
	Publishers  string `json:"publishers"`
	Queued      string `json:"queued"`
	QueueLength string `json:"queueLength"`
	Delivered   string `json:"delivered"`
	Clicks      string `json:"clicks"`
}

// readState is the script that reads a pageState.
const readState = `(() => {
	const o = document.querySelector('[data-broadcaster="orders"]');
	const c = document.querySelector('[data-broadcaster="clicks"]');
	const alert = o.querySelector('.alert[data-blocked-by]');
	const row = o.querySelector('tbody tr');
	const f = (el, sel) => { const x = el.querySelector(sel); return x ? x.textContent.trim() : ""; };
	return {
		updates: Number(document.body.dataset.updates),
		marker: window.fanoutTestMarker || 0,
		navigations: performance.getEntriesByType("navigation").length,
		blockedBy: alert ? alert.dataset.blockedBy : "",
		alert: alert ? alert.textContent : "",
		firstRow: row.dataset.watcherId,
		firstName: f(row, '[data-field="name"]'),
		blocking: row.classList.contains("blocking"),
		waited: alert ? alert.querySelector('[data-waited]').dataset.waited : "",
		accepted: f(o, '[data-stat="accepted"]'),
		publishers: f(o, '[data-stat="publishersWaiting"]'),
		queued: f(row, '[data-field="queued"]'),
		queueLength: f(row, '[data-field="queueLength"]'),
		delivered: f(row, '[data-field="delivered"]'),
		clicks: f(c, '[data-stat="accepted"]'),
	};
})()`

// Headless Chromium loads the live view of the demo program, whose
// publisher on "orders" waits for the unread watcher "stalled": the page
// names that watcher as the one blocking the publisher, first in its
// table, with the counts of Stats; it updates in place (its own script
// fetches the view again: no reload, the counters of "clicks" and the
// wait move on); and it requests nothing but its own URL, throws nothing
// and logs nothing.
func TestLiveViewInChromiumNamesTheStalledWatcherAndUpdatesWithoutReload(t *testing.T) {
	p := startDemo(t)
	ctx, log := browser(t)
	page := "http://" + p.Addr + viewPath
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(`[data-broadcaster="orders"]`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.fanoutTestMarker = 42`)); err != nil {
		t.Fatal(err)
	}
	first, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](readState))
	if err != nil {
		t.Fatal(err)
	}
	checkStalled(t, p, first)
	if first.Updates != 0 {
		t.Errorf("updates %d before the first refresh", first.Updates)
	}

	later := waitUpdates(ctx, t, 3)
	checkStalled(t, p, later)
	if later.Marker != 42 || later.Navigations != 1 {
		t.Errorf("marker %d, %d navigations: the page was reloaded", later.Marker, later.Navigations)
	}
	if atoi(t, later.Clicks) <= atoi(t, first.Clicks) {
		t.Errorf(`"clicks" accepted %s, then %s: the counts did not move on`, first.Clicks, later.Clicks)
	}
	if w0, w1 := atof(t, first.Waited), atof(t, later.Waited); w1 <= w0 {
		t.Errorf("waited %v s, then %v s: the wait did not move on", w0, w1)
	}
	checkRequests(t, log, page, later.Updates)
	takeScreenshot(ctx, t)
}

// checkStalled checks that the page names "stalled" as what blocks the
// publisher of "orders", with the counts of Stats (which no longer move:
// the publisher waits).
func checkStalled(t *testing.T, p *demo.Program, s pageState) {
	t.Helper()
	ws, bs := p.Stalled.Stats(), p.Orders.Stats()
	id := strconv.FormatUint(ws.ID, 10)
	if s.BlockedBy != id || !strings.Contains(s.Alert, "#"+id+" stalled") {
		t.Errorf("the alert names watcher %q (%q), want #%s stalled", s.BlockedBy, s.Alert, id)
	}
	if s.FirstRow != id || !s.Blocking || !strings.HasPrefix(s.FirstName, "stalled") || !strings.Contains(s.FirstName, "blocking") {
		t.Errorf("first row: watcher %s %q, blocking %v; want stalled, blocking", s.FirstRow, s.FirstName, s.Blocking)
	}
	got := []string{s.Accepted, s.Publishers, s.Queued, s.QueueLength, s.Delivered}
	want := []string{fmt.Sprint(bs.Accepted), "1", fmt.Sprint(ws.Queued), fmt.Sprint(ws.QueueLength), fmt.Sprint(ws.Delivered)}
	if !slices.Equal(got, want) {
		t.Errorf("accepted, publishers waiting, queued, queue length, delivered: page %v, Stats %v", got, want)
	}
}

// waitUpdates waits until the page has refreshed itself n times and
// returns its state.
func waitUpdates(ctx context.Context, t *testing.T, n int) pageState {
	t.Helper()
	for {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](readState))
		if err != nil {
			t.Fatal(err)
		}
		if s.Updates >= n {
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the page refreshed %d times, want %d", s.Updates, n)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkRequests checks that the tab requested the page once and its
// fragment at each update, nothing else, and had no exception or console
// message.
func checkRequests(t *testing.T, log *tabLog, page string, updates int) {
	t.Helper()
	requests, problems := log.snapshot()
	pages, fragments := 0, 0
	for _, r := range requests {
		u, err := url.Parse(r)
		switch {
		case err == nil && r == page:
			pages++
		case err == nil && u.Scheme+"://"+u.Host+u.Path == page && u.RawQuery == "format=fragment":
			fragments++
		default:
			t.Errorf("the page requested %s", r)
		}
	}
	if pages != 1 || fragments < updates {
		t.Errorf("%d page loads and %d fragments for %d updates", pages, fragments, updates)
	}
	for _, p := range problems {
		t.Errorf("the page: %s", p)
	}
}

// takeScreenshot takes a screenshot of the page, checks it is a PNG, and
// writes it where -screenshot says.
func takeScreenshot(ctx context.Context, t *testing.T) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 600 {
		t.Errorf("screenshot of %v", b)
	}
	if *screenshot != "" {
		if err := os.WriteFile(*screenshot, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
