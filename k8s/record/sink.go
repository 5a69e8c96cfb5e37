package record

import (
	"context"

	"github.com/fanout-go/fanout/k8s/record/util"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// sinkAdapter makes an [EventSink] a core sink: Create for a first
// occurrence, Patch (Create on a 404) for a repeat, as client-go's
// recordEvent. client-go's sinks take no context: a write in flight runs to
// its end.
type sinkAdapter struct {
	sink   EventSink
	logger klog.Logger
}

func (s *sinkAdapter) Create(_ context.Context, e *v1.Event) (*v1.Event, error) {
	return s.create(e)
}

func (s *sinkAdapter) create(e *v1.Event) (*v1.Event, error) {
	// A copy: the event may be shared with other sinks and watchers.
	c := *e
	c.ResourceVersion = ""
	stored, err := s.sink.Create(&c)
	return s.result(&c, stored, err)
}

func (s *sinkAdapter) Update(_ context.Context, e *v1.Event) (*v1.Event, error) {
	patch, err := repeatPatch(e)
	if err != nil {
		// As client-go, which logs the failed diff and patches with nothing.
		s.logger.Error(err, "Event correlation failed")
	}
	stored, err := s.sink.Patch(e, patch)
	if util.IsKeyNotFoundError(err) {
		// On the runner's own copy, as client-go clears it on its copy:
		// a retry then patches without the stale version too.
		e.ResourceVersion = ""
		return s.create(e)
	}
	return s.result(e, stored, err)
}

// result logs a failed write as client-go does and stands in the written
// event for a sink that returned none, so that the correlator always
// learns what was stored.
func (s *sinkAdapter) result(sent, stored *v1.Event, err error) (*v1.Event, error) {
	if err == nil {
		if stored == nil {
			stored = sent
		}
		return stored, nil
	}
	switch err.(type) {
	case *restclient.RequestConstructionError:
		s.logger.Error(err, "Unable to construct event (will not retry!)", "event", sent)
	case *apierrors.StatusError:
		if apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			s.logger.V(5).Info("Server rejected event (will not retry!)", "event", sent, "err", err)
		} else {
			s.logger.Error(err, "Server rejected event (will not retry!)", "event", sent)
		}
	default:
		s.logger.Error(err, "Unable to write event (may retry after sleeping)", "event", sent)
	}
	return nil, err
}
