package record

import (
	"context"

	"github.com/fanout-go/fanout/k8s/internal/adapt"
	"github.com/fanout-go/fanout/k8s/record/util"
	lru "github.com/hashicorp/golang-lru/v2"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// sinkAdapter makes an [EventSink] a core sink: Create for a first
// occurrence, Patch (Create on a 404) for a repeat, as client-go's
// recordEvent. client-go's sinks take no context: a write in flight runs to
// its end.
//
// It remembers, by deduplication key, the name and resourceVersion of what
// the sink stored, and patches a repeat of that key with them, as
// client-go does: there the correlator learns them (UpdateState, under the
// key of the stored event) before it correlates the next repeat, as it
// writes one event at a time. With several writers the correlator may have
// correlated later repeats before the write before them ended, and ignores
// the stored state it learns then, older than its count (see
// fanout.Correlator.Observe); but the writes of one event are never
// concurrent, so the one before a repeat has ended when the repeat is
// written, and what it stored is here.
type sinkAdapter struct {
	sink   EventSink
	logger klog.Logger
	stored *lru.Cache[string, storedRef] // by eventKey of what was stored
}

// storedRef is what the sink stored for an event: the name and version
// its next patch refers to.
type storedRef struct{ name, resourceVersion string }

func newSinkAdapter(sink EventSink, logger klog.Logger, cacheSize int) *sinkAdapter {
	c, _ := lru.New[string, storedRef](adapt.CacheSize(cacheSize)) // errs only for a size <= 0
	return &sinkAdapter{sink: sink, logger: logger, stored: c}
}

func (s *sinkAdapter) Create(_ context.Context, e *v1.Event) (*v1.Event, error) {
	return s.create(e, "")
}

// create writes e as a new event; key is e's eventKey if the caller has
// built it, else "" (see result).
func (s *sinkAdapter) create(e *v1.Event, key string) (*v1.Event, error) {
	// A copy: the event may be shared with other sinks and watchers.
	c := *e
	c.ResourceVersion = ""
	stored, err := s.sink.Create(&c)
	return s.result(&c, stored, err, key)
}

// refer makes e, a repeat about to be patched (the runner's own copy),
// refer to what the sink last stored under key, e's eventKey, if it
// remembers.
func (s *sinkAdapter) refer(e *v1.Event, key string) {
	if r, ok := s.stored.Get(key); ok {
		e.Name, e.ResourceVersion = r.name, r.resourceVersion
	}
}

// Update patches a repeat. Its key is built once, for the look-up, a
// removal and what is remembered (the fields of the key are none of those
// refer and the patch change).
func (s *sinkAdapter) Update(_ context.Context, e *v1.Event) (*v1.Event, error) {
	key := eventKey(e)
	s.refer(e, key)
	patch, err := repeatPatch(e)
	if err != nil {
		// As client-go, which logs the failed diff and patches with nothing.
		s.logger.Error(err, "Event correlation failed")
	}
	stored, err := s.sink.Patch(e, patch)
	if util.IsKeyNotFoundError(err) {
		// On the runner's own copy, as client-go clears it on its copy:
		// a retry then patches without the stale version too, and what
		// the sink stored is gone.
		e.ResourceVersion = ""
		s.stored.Remove(key)
		return s.create(e, key)
	}
	return s.result(e, stored, err, key)
}

// result logs a failed write as client-go does and stands in the written
// event for a sink that returned none, so that the correlator always
// learns what was stored, and remembers it (see refer) under the eventKey
// of what was stored: key, sent's eventKey if not "", when the two agree
// on its fields, as a server's reply does.
func (s *sinkAdapter) result(sent, stored *v1.Event, err error, key string) (*v1.Event, error) {
	if err == nil {
		if stored == nil {
			stored = sent
		}
		if key == "" || !sameKey(sent, stored) {
			key = eventKey(stored)
		}
		s.stored.Add(key, storedRef{stored.Name, stored.ResourceVersion})
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
