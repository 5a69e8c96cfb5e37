package util

import (
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
