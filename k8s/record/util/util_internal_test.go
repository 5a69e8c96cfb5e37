package util

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The hand-written subdomain check agrees with apimachinery's on the names
// events get and on arbitrary strings.
func FuzzSubdomainSameAsAPIMachinery(f *testing.F) {
	for _, s := range []string{"web.1234", "web-1.x", "a", "", ".", "a.", ".a", "a..b", "a-.b", "a.-b", "-a", "a-",
		"Upper.1", "under_score.1", "a.b.c", "0.0", strings.Repeat("a", 253), strings.Repeat("a", 254), "é.1", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := len(validation.IsDNS1123Subdomain(s)) == 0
		if got := isDNS1123Subdomain(s); got != want {
			t.Errorf("isDNS1123Subdomain(%q) = %v, apimachinery says %v", s, got, want)
		}
	})
}

// The name is valid exactly when apimachinery says so of the whole name,
// and its hex is strconv's, whatever refName and the time.
func FuzzGenerateEventNameChecksTheWholeName(f *testing.F) {
	for _, s := range []string{"web", "web-", "web.", "", "a.b", strings.Repeat("a", 236), strings.Repeat("a", 237), "Upper"} {
		f.Add(s, int64(0x187a3c2d4e5f6071))
		f.Add(s, int64(0))
		f.Add(s, int64(-1))
	}
	f.Fuzz(func(t *testing.T, refName string, unixNano int64) {
		want := refName + "." + strconv.FormatInt(unixNano, 16)
		got := GenerateEventName(refName, unixNano)
		if valid := len(validation.IsDNS1123Subdomain(want)) == 0; valid != (got == want) {
			t.Errorf("GenerateEventName(%q, %d) = %q; %q valid: %v", refName, unixNano, got, want, valid)
		}
	})
}
