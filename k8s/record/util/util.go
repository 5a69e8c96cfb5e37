// Package util mirrors client-go's tools/record/util: the helpers the
// record and events packages use to name events, validate their type and
// recognise a missing event. Same signatures, same results.
package util

import (
	"net/http"
	"strconv"

	"github.com/google/uuid"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ValidateEventType reports whether eventtype is one the API accepts:
// Normal or Warning.
func ValidateEventType(eventtype string) bool {
	return eventtype == v1.EventTypeNormal || eventtype == v1.EventTypeWarning
}

// IsKeyNotFoundError reports whether err is an API status error with code
// 404, looking at err itself, not at errors it wraps (as client-go).
func IsKeyNotFoundError(err error) bool {
	s, ok := err.(*apierrors.StatusError)
	return ok && s != nil && s.Status().Code == http.StatusNotFound
}

// GenerateEventName returns "<refName>.<unixNano in hex>", or a random UUID
// when that is not a valid DNS subdomain (too long, or refName has
// characters a name cannot).
func GenerateEventName(refName string, unixNano int64) string {
	// Built in one allocation: the stack buffer holds most names, and
	// only the string is copied to the heap. A negative time puts a '-'
	// at the start of the last label, never valid; otherwise the suffix
	// is lower-case hex digits, a valid label, so the name is a subdomain
	// when refName is one and the whole fits.
	if unixNano < 0 {
		return uuid.New().String()
	}
	buf := strconv.AppendUint(append(append(make([]byte, 0, 96), refName...), '.'), uint64(unixNano), 16)
	if len(buf) > maxSubdomainLength || !isDNS1123Subdomain(refName) {
		return uuid.New().String()
	}
	return string(buf)
}

// maxSubdomainLength is apimachinery's DNS1123SubdomainMaxLength.
const maxSubdomainLength = 253

// isDNS1123Subdomain reports what apimachinery's
// validation.IsDNS1123Subdomain (client-go's check, through
// NameIsDNSSubdomain) reports as valid: at most 253 characters, dot-separated
// labels of lower-case letters, digits and '-', each starting and ending with
// a letter or digit. Written out because the regular expression took a
// quarter of the CPU time of recording an event.k8s.io event (the events
// group of the benchmark harness); FuzzSubdomainSameAsAPIMachinery checks
// that both agree.
func isDNS1123Subdomain(s string) bool {
	if len(s) == 0 || len(s) > maxSubdomainLength {
		return false
	}
	start := true // at the first character of a label
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		switch {
		case alnum:
			start = false
		case c == '-' && !start:
		case c == '.' && !start && s[i-1] != '-':
			start = true
		default:
			return false
		}
	}
	return s[len(s)-1] != '-' && !start
}
