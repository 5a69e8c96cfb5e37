package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// This file holds the command's check, at start, that its identity may
// do what the configuration needs: a Lease the RBAC does not grant made
// an exporter lead for a few seconds (creating a Lease needs no name),
// lose the Lease at its first renewal, and then stand by for ever.

// access is one request the exporter makes: verb on a resource (of an API
// group) in a namespace ("" for all), by name ("" for any).
type access struct {
	verb, group, resource, namespace, name string
	// create marks a create that is needed only while the object does
	// not exist: get is checked first.
	create bool
}

func (a access) String() string {
	what := a.resource
	if a.group != "" {
		what += "." + a.group
	}
	if a.name != "" {
		what += " " + a.name
	}
	where := "in every namespace"
	if a.namespace != "" {
		where = "in namespace " + a.namespace
	}
	return a.verb + " " + what + " " + where
}

// accessNeeds returns the requests the exporter makes with cfg and the
// flags: list and watch its events; get, update and (if missing) create
// its checkpoint ConfigMap and its Lease.
func accessNeeds(cfg *Config, fl *flags) []access {
	group := ""
	if cfg.API == EventsV1 {
		group = "events.k8s.io"
	}
	needs := []access{
		{verb: "list", group: group, resource: "events", namespace: cfg.Namespace},
		{verb: "watch", group: group, resource: "events", namespace: cfg.Namespace},
	}
	object := func(group, resource, ns, name string) {
		needs = append(needs, access{verb: "get", group: group, resource: resource, namespace: ns, name: name},
			access{verb: "update", group: group, resource: resource, namespace: ns, name: name},
			access{verb: "create", group: group, resource: resource, namespace: ns, name: name, create: true})
	}
	if cm := cfg.Checkpoint.ConfigMap; cm != nil {
		object("", "configmaps", cm.Namespace, cm.Name)
	}
	if fl.leaderElect {
		object("coordination.k8s.io", "leases", fl.leaseNamespace, fl.leaseName)
	}
	return needs
}

// errAccessDenied is the error of a start refused because the exporter's
// identity may not make a request the configuration needs.
var errAccessDenied = errors.New("access denied")

// checkAccess asks the API server (SelfSubjectAccessReview) whether the
// exporter's identity may make each request of needs, and returns an
// error naming those it may not: the exporter then exits at once rather
// than lead without being able to renew its Lease, or stand by for ever.
// A create of an object that exists is not needed. Where the review
// itself fails (an API server that does not serve it), it logs a warning
// and lets the start go on.
func checkAccess(ctx context.Context, client kubernetes.Interface, needs []access, log *slog.Logger) error {
	var denied []string
	for _, a := range needs {
		ok, err := allowed(ctx, client, a)
		if err != nil {
			log.Warn("could not check the exporter's permissions; starting anyway", "request", a.String(), "err", err)
			return nil
		}
		if !ok && a.create && exists(ctx, client, a) {
			ok = true
		}
		if !ok {
			denied = append(denied, a.String())
		}
	}
	if len(denied) == 0 {
		return nil
	}
	return fmt.Errorf("%w: this identity may not %s: grant it in the Role or ClusterRole bound to the "+
		"exporter's ServiceAccount (see deploy/rbac.yaml), or name the objects they grant (the Lease with "+
		"--leader-elect-name, the checkpoint ConfigMap with checkpoint.configMap)", errAccessDenied,
		strings.Join(denied, "; "))
}

// allowed asks whether the exporter's identity may make request a.
func allowed(ctx context.Context, client kubernetes.Interface, a access) (bool, error) {
	if a.create {
		a.name = "" // RBAC cannot limit create to a name: a create request has none
	}
	r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace, Name: a.name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

// exists reports whether the object of a create request exists (get is
// allowed: it is checked before).
func exists(ctx context.Context, client kubernetes.Interface, a access) bool {
	var err error
	switch a.resource {
	case "leases":
		_, err = client.CoordinationV1().Leases(a.namespace).Get(ctx, a.name, metav1.GetOptions{})
	case "configmaps":
		_, err = client.CoreV1().ConfigMaps(a.namespace).Get(ctx, a.name, metav1.GetOptions{})
	default:
		return false
	}
	return err == nil || !apierrors.IsNotFound(err)
}
