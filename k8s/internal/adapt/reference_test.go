package adapt_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/reference"

	"github.com/fanout-go/fanout/k8s/internal/adapt"
)

// unregistered has object meta but is in no scheme.
type unregistered struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (u *unregistered) DeepCopyObject() runtime.Object { c := *u; return &c }

// kindOnly has a kind but no metadata at all.
type kindOnly struct{ metav1.TypeMeta }

func (k *kindOnly) DeepCopyObject() runtime.Object { c := *k; return &c }

func TestReferenceIsGetReference(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "uid-1", ResourceVersion: "42"}
	withKind := &unstructured.Unstructured{}
	withKind.SetAPIVersion("example.com/v1")
	withKind.SetKind("Widget")
	withKind.SetName("w")
	withKind.SetNamespace("ns")
	objects := map[string]runtime.Object{
		"pod without kind":         &corev1.Pod{ObjectMeta: meta},
		"pod with its kind":        &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: meta},
		"pod with another kind":    &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Other", APIVersion: "x.io/v2"}, ObjectMeta: meta},
		"deployment without kind":  &appsv1.Deployment{ObjectMeta: meta},
		"unstructured with kind":   withKind,
		"unstructured, no kind":    &unstructured.Unstructured{Object: map[string]any{}},
		"list":                     &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}},
		"reference":                &corev1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec"},
		"unregistered":             &unregistered{ObjectMeta: meta},
		"unregistered with a kind": &unregistered{TypeMeta: metav1.TypeMeta{Kind: "U", APIVersion: "u/v1"}, ObjectMeta: meta},
		"no metadata":              &kindOnly{TypeMeta: metav1.TypeMeta{Kind: "K", APIVersion: "v1"}},
	}
	for _, sch := range []*runtime.Scheme{scheme.Scheme, nil} {
		for name, obj := range objects {
			want, wantErr := reference.GetReference(sch, obj)
			got, err := adapt.Reference(sch, obj)
			if wantErr != nil {
				if assert.Error(t, err, name) {
					assert.Equal(t, wantErr.Error(), err.Error(), name)
				}
				continue
			}
			if assert.NoError(t, err, name) {
				assert.Equal(t, *want, got, name)
			}
		}
	}
}

func TestReferenceOfANilReferenceIsAnError(t *testing.T) {
	_, err := adapt.Reference(scheme.Scheme, (*corev1.ObjectReference)(nil))
	assert.ErrorIs(t, err, adapt.ErrNilReference)
}

func TestReferenceDoesNotAllocateForATypedObject(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "uid-1"}}
	if n := testing.AllocsPerRun(100, func() { _, _ = adapt.Reference(scheme.Scheme, pod) }); n != 0 {
		t.Errorf("Reference allocated %v times, want 0", n)
	}
}
