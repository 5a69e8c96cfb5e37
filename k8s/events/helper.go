package events

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	eventsv1beta1 "k8s.io/api/events/v1beta1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// GetFieldSelector returns the field selector that lists or watches the
// events about one object, for the events API version the client uses:
// the fields regarding.* for events.k8s.io (v1 and v1beta1),
// involvedObject.* for core/v1. Only the non-empty parts of the object's
// kind, group version, name and UID are matched. Another API version is an
// error.
func GetFieldSelector(eventsGroupVersion schema.GroupVersion, regardingGroupVersionKind schema.GroupVersionKind, regardingName string, regardingUID types.UID) (fields.Selector, error) {
	var prefix string
	switch eventsGroupVersion {
	case eventsv1.SchemeGroupVersion, eventsv1beta1.SchemeGroupVersion:
		prefix = "regarding"
	case corev1.SchemeGroupVersion:
		prefix = "involvedObject"
	default:
		return nil, fmt.Errorf("unknown version %v", eventsGroupVersion)
	}
	set := fields.Set{}
	if regardingName != "" {
		set[prefix+".name"] = regardingName
	}
	if kind := regardingGroupVersionKind.Kind; kind != "" {
		set[prefix+".kind"] = kind
	}
	if gv := regardingGroupVersionKind.GroupVersion(); !gv.Empty() {
		set[prefix+".apiVersion"] = gv.String()
	}
	if regardingUID != "" {
		set[prefix+".uid"] = string(regardingUID)
	}
	return set.AsSelector(), nil
}
