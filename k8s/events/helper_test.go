package events

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	eventsv1beta1 "k8s.io/api/events/v1beta1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientevents "k8s.io/client-go/tools/events"
)

func TestGetFieldSelector(t *testing.T) {
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	cases := []struct {
		name    string
		events  schema.GroupVersion
		gvk     schema.GroupVersionKind
		objName string
		uid     types.UID
		want    string
		wantErr string
	}{
		{"events v1, all", eventsv1.SchemeGroupVersion, deploy, "d", "u1",
			"regarding.apiVersion=apps/v1,regarding.kind=Deployment,regarding.name=d,regarding.uid=u1", ""},
		{"events v1beta1", eventsv1beta1.SchemeGroupVersion, pod, "p", "",
			"regarding.apiVersion=v1,regarding.kind=Pod,regarding.name=p", ""},
		{"core v1", corev1.SchemeGroupVersion, pod, "p", "u2",
			"involvedObject.apiVersion=v1,involvedObject.kind=Pod,involvedObject.name=p,involvedObject.uid=u2", ""},
		{"name only", eventsv1.SchemeGroupVersion, schema.GroupVersionKind{}, "x", "", "regarding.name=x", ""},
		{"kind without version", corev1.SchemeGroupVersion, schema.GroupVersionKind{Kind: "Node"}, "", "", "involvedObject.kind=Node", ""},
		{"nothing", eventsv1.SchemeGroupVersion, schema.GroupVersionKind{}, "", "", "", ""},
		{"unknown version", schema.GroupVersion{Group: "events.k8s.io", Version: "v2"}, pod, "p", "", "", "unknown version events.k8s.io/v2"},
		{"empty version", schema.GroupVersion{}, pod, "p", "", "", "unknown version "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GetFieldSelector(tc.events, tc.gvk, tc.objName, tc.uid)
			theirs, theirErr := clientevents.GetFieldSelector(tc.events, tc.gvk, tc.objName, tc.uid)
			if tc.wantErr != "" {
				assert.EqualError(t, err, tc.wantErr)
				assert.EqualError(t, theirErr, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.NoError(t, theirErr)
			// A selector's terms come in no fixed order.
			assert.Equal(t, tc.want, sortedTerms(got.String()))
			assert.Equal(t, sortedTerms(theirs.String()), sortedTerms(got.String()))
			assert.True(t, got.Matches(fields.Set(terms(tc.want))))
		})
	}
}

func sortedTerms(s string) string {
	if s == "" {
		return ""
	}
	t := strings.Split(s, ",")
	slices.Sort(t)
	return strings.Join(t, ",")
}

func terms(s string) map[string]string {
	m := map[string]string{}
	if s == "" {
		return m
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}
