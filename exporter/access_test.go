package exporter

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// reviewing makes cs answer SelfSubjectAccessReviews with allow.
func reviewing(cs *fake.Clientset, allow func(a *authorizationv1.ResourceAttributes) bool) {
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		r := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		r.Status.Allowed = allow(r.Spec.ResourceAttributes)
		return true, r, nil
	})
}

func leaseNeeds(t *testing.T) []access {
	t.Helper()
	cfg := testConfig(t, &memSink{})
	cfg.Checkpoint.ConfigMap = &ConfigMapRef{Namespace: "ops", Name: "ck"}
	return accessNeeds(cfg, &flags{leaderElect: true, leaseNamespace: "ops", leaseName: "fanout-eventer"})
}

func TestAccessCheckNamesEveryRequestItsIdentityMayNotMake(t *testing.T) {
	cs := fake.NewClientset()
	reviewing(cs, func(a *authorizationv1.ResourceAttributes) bool {
		return a.Resource != "leases" || a.Verb == "get" // an update of the Lease, and its create, denied
	})
	err := checkAccess(t.Context(), cs, leaseNeeds(t), slog.New(slog.DiscardHandler))
	if !errors.Is(err, errAccessDenied) || !strings.Contains(err.Error(),
		"may not update leases.coordination.k8s.io fanout-eventer in namespace ops; create leases.coordination.k8s.io fanout-eventer in namespace ops") {
		t.Errorf("err %v", err)
	}
}

func TestAccessCheckNeedsNoCreateOfAnObjectThatExists(t *testing.T) {
	cs := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "fanout-eventer"}})
	reviewing(cs, func(a *authorizationv1.ResourceAttributes) bool {
		return a.Verb != "create" || a.Resource == "configmaps"
	})
	if err := checkAccess(t.Context(), cs, leaseNeeds(t), slog.New(slog.DiscardHandler)); err != nil {
		t.Errorf("err %v, want none: the Lease exists", err)
	}
}

func TestAccessCheckThatCannotBeMadeLetsTheStartGoOn(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, errors.New("the server could not find the requested resource")
	})
	if err := checkAccess(context.Background(), cs, leaseNeeds(t), slog.New(slog.DiscardHandler)); err != nil {
		t.Errorf("err %v, want none (a warning)", err)
	}
}
