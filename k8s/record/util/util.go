// Package util mirrors client-go's tools/record/util: the helpers the
// record and events packages use to name events, validate their type and
// recognise a missing event. Same signatures, same results.
package util

import (
	"fmt"
	"net/http"

	"github.com/google/uuid"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
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
	name := fmt.Sprintf("%s.%x", refName, unixNano)
	if len(validation.NameIsDNSSubdomain(name, false)) > 0 {
		return uuid.New().String()
	}
	return name
}
