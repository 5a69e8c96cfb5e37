package debug

import (
	"crypto/sha256"
	_ "embed" // the page's template, style and script
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

var (
	//go:embed page.html
	pageHTML string
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string
)

// page is the HTML template: the page, and its "view" fragment that the
// page's script fetches again every refresh period.
var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"rate": rateText, "secs": secsText, "spark": sparkline, "bar": fillBar,
	"value": valueText, "reasons": reasonsText, "runners": hasRunners,
}).Parse(pageHTML))

// csp is the page's Content-Security-Policy: its own style and script
// (by hash), fetches to its own origin, and nothing else: no image, font,
// frame, form or other connection.
var csp = "default-src 'none'; style-src '" + hash(pageCSS) + "'; script-src '" + hash(pageJS) +
	"'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// setPageHeaders sets the headers of the HTML page and its fragment.
func setPageHeaders(h http.Header) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// render writes the page p, or only its view when fragment is set.
func render(w io.Writer, p Page, fragment bool) error {
	if fragment {
		return page.ExecuteTemplate(w, "view", p)
	}
	return page.Execute(w, struct {
		Page          Page
		CSS           template.CSS
		JS            template.JS
		RefreshMillis int64
	}{p, template.CSS(pageCSS), template.JS(pageJS), int64(p.RefreshSeconds * 1000)})
}

// rateText shows a rate per second, or a dash before there is one.
func rateText(r *float64) string {
	if r == nil {
		return "–"
	}
	return strconv.FormatFloat(*r, 'f', 1, 64) + "/s"
}

// secsText shows a number of seconds (a float64 or a *float64) as a
// duration.
func secsText(v any) string {
	var s float64
	switch x := v.(type) {
	case float64:
		s = x
	case *float64:
		if x == nil {
			return ""
		}
		s = *x
	}
	d := time.Duration(s * float64(time.Second))
	if d >= time.Second {
		d = d.Round(100 * time.Millisecond)
	}
	return d.String()
}

// valueText shows a field's value.
func valueText(v any) string {
	switch x := v.(type) {
	case time.Time:
		if x.IsZero() {
			return "never"
		}
		return x.Format(time.RFC3339) + " (" + time.Since(x).Round(time.Second).String() + " ago)"
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		if x {
			return "yes"
		}
		return "no"
	}
	return fmt.Sprint(v)
}

// reasonsText lists the non-zero drop counts, for a cell's title.
func reasonsText(d Drops) string {
	var b strings.Builder
	for _, f := range d.reasons() {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", f.Name, f.Value)
	}
	return b.String()
}

// hasRunners reports whether one of the broadcaster's listed watchers has a
// runner: the table then has the runners' columns.
func hasRunners(v BroadcasterView) bool {
	for _, w := range v.WatcherList {
		if w.Runner != nil {
			return true
		}
	}
	return false
}

// sparkline draws the points as an inline SVG line, 80 by 16, scaled to
// their largest; nothing for fewer than two points. Only numbers go into
// it, and color is one of the template's constants.
func sparkline(points []float64, color string) template.HTML {
	if len(points) < 2 {
		return ""
	}
	const w, h = 80.0, 16.0
	top := 0.0
	for _, p := range points {
		top = max(top, p)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" width="80" height="16" viewBox="0 0 80 16" aria-hidden="true"><polyline fill="none" stroke="%s" stroke-width="1.2" points="`, template.HTMLEscapeString(color))
	for i, p := range points {
		y := h - 1
		if top > 0 && !math.IsNaN(p) {
			y = h - 1 - (p/top)*(h-2)
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", float64(i)*w/float64(len(points)-1), y)
	}
	b.WriteString(`"/></svg>`)
	return template.HTML(b.String())
}

// fillBar draws a queue's fill (0 to 1) as an inline SVG bar, 60 by 8:
// green under half, amber under nine tenths, red above.
func fillBar(fill float64) template.HTML {
	color := "#2f9e5b"
	switch {
	case fill >= 0.9:
		color = "#d23c3c"
	case fill >= 0.5:
		color = "#d98c10"
	}
	return template.HTML(fmt.Sprintf(`<svg class="bar" width="60" height="8" viewBox="0 0 60 8" aria-hidden="true">`+
		`<rect width="60" height="8" rx="2" fill="#e6e9ef"/><rect width="%.1f" height="8" rx="2" fill="%s"/></svg>`,
		60*min(max(fill, 0), 1), color))
}
