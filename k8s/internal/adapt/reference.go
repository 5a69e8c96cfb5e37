package adapt

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ErrNilReference is Reference's error for a nil *corev1.ObjectReference,
// which client-go's reference.GetReference returns as a nil reference and
// no error.
var ErrNilReference = errors.New("can't reference a nil reference")

// Reference is client-go's reference.GetReference returning the reference
// itself rather than a pointer to a new one: the recorders copy it into
// the event anyway, and the allocation was a tenth of the bytes recording
// an events.k8s.io event allocates. The same fields, the same errors, but
// for a nil *corev1.ObjectReference (ErrNilReference); a reference is
// returned as a copy. obj must not be nil; a panic of obj's methods is the
// caller's to recover, as with GetReference.
func Reference(scheme *runtime.Scheme, obj runtime.Object) (corev1.ObjectReference, error) {
	if ref, ok := obj.(*corev1.ObjectReference); ok {
		if ref == nil {
			return corev1.ObjectReference{}, ErrNilReference
		}
		return *ref, nil
	}
	// A list has no object meta, but enough to reference it.
	var common metav1.Common
	object, err := meta.Accessor(obj)
	if err == nil {
		common = object
	} else if common, err = meta.CommonAccessor(obj); err != nil {
		return corev1.ObjectReference{}, err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		// No kind in the object: the scheme's first, as client-go.
		if scheme == nil {
			return corev1.ObjectReference{}, errors.New("scheme is required to look up gvk")
		}
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			return corev1.ObjectReference{}, err
		}
		if len(gvks) == 0 || gvks[0].Empty() {
			return corev1.ObjectReference{}, fmt.Errorf("unexpected gvks registered for object %T: %v", obj, gvks)
		}
		gvk = gvks[0]
	}
	ref := corev1.ObjectReference{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String()}
	if object == nil {
		ref.ResourceVersion = common.GetResourceVersion()
		return ref, nil
	}
	ref.Name, ref.Namespace, ref.UID = object.GetName(), object.GetNamespace(), object.GetUID()
	ref.ResourceVersion = object.GetResourceVersion()
	return ref, nil
}
