package debug

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanout-go/fanout/internal/guard"
)

// Defaults of the [Handler]'s options.
const (
	// DefaultRefresh is how often the page refreshes itself.
	DefaultRefresh = time.Second
	// DefaultRateWindow is the window of the rates.
	DefaultRateWindow = 10 * time.Second
	// DefaultHistory is the number of points of a sparkline.
	DefaultHistory = 60
	// DefaultLimit is the number of watchers the page shows per
	// broadcaster, and of broadcasters per section.
	DefaultLimit = 50
)

// Handler is the live view: an [http.Handler] that serves, for GET and
// HEAD only, the page of the sources registered with it, as HTML, or as
// JSON with ?format=json (see the package documentation). Make it with
// [New]; it is safe for concurrent use.
type Handler struct {
	refresh, window time.Duration
	limit           int

	mu      sync.Mutex
	sources []*registered
	rates   *rates        // guarded by mu
	tickets atomic.Uint64 // numbers the reads of the sources (see stale)
}

// registered is a registered source; kept is the ticket of the last read
// of it whose samples the rates kept (guarded by Handler.mu).
type registered struct {
	s    Source
	kept uint64
}

// Option configures [New].
type Option func(*Handler)

// WithRefresh sets how often the page refreshes itself, which is also the
// least time between two samples the rates keep (default
// [DefaultRefresh]); it must be positive.
func WithRefresh(d time.Duration) Option { return func(h *Handler) { h.refresh = d } }

// WithRateWindow sets the window of the rates (default
// [DefaultRateWindow]); it must be at least the refresh period.
func WithRateWindow(d time.Duration) Option { return func(h *Handler) { h.window = d } }

// WithLimit sets how many watchers the HTML page shows per broadcaster,
// and broadcasters per section, those that need attention first (default
// [DefaultLimit]; 0 shows all; negative is an error). The JSON shows all
// unless the request says otherwise (?limit=).
func WithLimit(n int) Option { return func(h *Handler) { h.limit = n } }

// New returns a handler with no source. An option with a value it cannot
// mean is returned as an error.
func New(opts ...Option) (*Handler, error) {
	h := &Handler{refresh: DefaultRefresh, window: DefaultRateWindow, limit: DefaultLimit}
	for _, o := range opts {
		if o != nil {
			o(h)
		}
	}
	switch {
	case h.refresh <= 0:
		return nil, fmt.Errorf("debug: WithRefresh(%v): the period must be positive", h.refresh)
	case h.window < h.refresh:
		return nil, fmt.Errorf("debug: WithRateWindow(%v): the window must be at least the refresh period (%v)", h.window, h.refresh)
	case h.limit < 0:
		return nil, fmt.Errorf("debug: WithLimit(%d): the limit must be 0 (all) or more", h.limit)
	}
	h.rates = newRates(h.refresh, h.window, DefaultHistory)
	return h, nil
}

// Register adds s to the page, after the sources registered before it,
// and returns the function that removes it (idempotent). A nil s is
// ignored. Registering costs nothing but this call: the sources are read
// only when the page is loaded.
func (h *Handler) Register(s Source) (unregister func()) {
	if s == nil {
		return func() {}
	}
	r := &registered{s: s}
	h.mu.Lock()
	h.sources = append(h.sources, r)
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.sources = slices.DeleteFunc(h.sources, func(x *registered) bool { return x == r })
	}
}

// errBadRequest marks a request the handler cannot answer.
var errBadRequest = errors.New("debug: bad request")

// ServeHTTP serves the page: HTML by default, the fragment the page
// refreshes itself with for ?format=fragment, JSON ([Page]) for
// ?format=json. ?limit=n sets how many watchers per broadcaster (and
// broadcasters per section) are listed, 0 for all. Any method but GET and
// HEAD is refused (405): the view changes nothing. A JSON page that cannot
// be encoded is answered with a 500 and the error.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the fanout view is read-only: GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	format, limit, err := h.params(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p := h.Page(limit)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if format == "json" {
		serveJSON(w, p)
		return
	}
	setPageHeaders(w.Header())
	_ = render(w, p, format == "fragment")
}

// serveJSON writes p as JSON, or, if it cannot be encoded, a 500 with the
// error: never a 200 with an empty or partial body.
func serveJSON(w http.ResponseWriter, p Page) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(p); err != nil { // compact: indenting doubled the cost of a large page
		http.Error(w, "debug: the page cannot be encoded as JSON: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf.Bytes())
}

// params returns the request's format and limit.
func (h *Handler) params(r *http.Request) (format string, limit int, err error) {
	q := r.URL.Query()
	format = q.Get("format")
	switch format {
	case "", "html":
		limit = h.limit
	case "fragment":
		limit = h.limit
	case "json":
		limit = 0
	default:
		return "", 0, fmt.Errorf("%w: format=%q: want html, json or fragment", errBadRequest, format)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return "", 0, fmt.Errorf("%w: limit=%q: want 0 (all) or a positive number", errBadRequest, s)
		}
		limit = n
	}
	return format, limit, nil
}

// Page returns the view now, with at most limit watchers per broadcaster
// and broadcasters per section (0: all): what ?format=json serves. Like a
// page load, it reads every source and samples their counters for the
// rates.
func (h *Handler) Page(limit int) Page {
	h.mu.Lock()
	srcs := slices.Clone(h.sources)
	h.mu.Unlock()
	secs := make([]Section, len(srcs))
	tickets := make([]uint64, len(srcs))
	for i, r := range srcs {
		tickets[i] = h.tickets.Add(1) // just before the read: a lower ticket began it earlier
		secs[i] = section(r.s)
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	return Page{Time: now, RateWindowSeconds: h.window.Seconds(), RefreshSeconds: h.refresh.Seconds(),
		Sections: viewOf(srcs, secs, h.rates, now, limit, stale(srcs, tickets))}
}

// stale returns the sources whose read is older than one whose samples the
// rates already kept (page loads at once), and notes the others' tickets
// as kept. Caller holds h.mu.
func stale(srcs []*registered, tickets []uint64) map[*registered]bool {
	old := map[*registered]bool{}
	for i, r := range srcs {
		if tickets[i] < r.kept {
			old[r] = true
		} else {
			r.kept = tickets[i]
		}
	}
	return old
}

// section returns s's section; a source that panics shows the panic.
func section(s Source) (sec Section) {
	if err := guard.Call(func() { sec = s.Section() }); err != nil {
		return Section{Name: sec.Name, Kind: "error", Fields: []Field{{"error", err.Error()}}}
	}
	return sec
}
