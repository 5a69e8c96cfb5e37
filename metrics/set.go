package metrics

import (
	"errors"
	"reflect"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanout-go/fanout"
)

// Set is a prometheus.Collector of sources that come and go as a program
// runs (a broadcaster per tenant, per connection): register the set once,
// then [Set.Add] each source as it starts and [Set.Remove] it once it is
// done. A [Collector] cannot be taken back out of a registry (client_golang
// finds a collector to unregister by its descriptors, and an unchecked
// collector has none), so one registered per short-lived source would
// stay, with its source, for the program's life. A Set is safe for
// concurrent use; a scrape reads the sources it holds when it starts.
type Set struct {
	mu      sync.Mutex
	members map[fanout.MetricSource]*Collector
}

// NewSet returns an empty set.
func NewSet() *Set {
	return &Set{members: map[fanout.MetricSource]*Collector{}}
}

var (
	errNilSource     = errors.New("metrics: Set.Add: nil source")
	errNotComparable = errors.New("metrics: Set.Add: the source is not comparable (==), so it cannot be removed: add a pointer to it")
	errAdded         = errors.New("metrics: Set.Add: the source is in the set already")
)

// Add adds src to the set, its samples labelled with constLabels (nil:
// none), as [NewCollector] would. Sources whose samples would carry the
// same names and labels must be told apart by constLabels, or the scrape
// fails, naming the sample. It returns an error, and adds nothing, for a
// nil source, a source already in the set, or one that is not comparable
// (Remove finds sources by ==: add a pointer).
func (s *Set) Add(src fanout.MetricSource, constLabels prometheus.Labels) error {
	if src == nil {
		return errNilSource
	}
	if !reflect.ValueOf(src).Comparable() {
		return errNotComparable
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.members[src]; ok {
		return errAdded
	}
	s.members[src] = NewCollector(src, constLabels)
	return nil
}

// Remove takes src out of the set, so that scrapes no longer report it,
// and reports whether it was there.
func (s *Set) Remove(src fanout.MetricSource) bool {
	if src == nil || !reflect.ValueOf(src).Comparable() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.members[src]
	delete(s.members, src)
	return ok
}

// Len returns the number of sources in the set.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.members)
}

// Describe sends nothing: the set is an unchecked collector, as its
// members come and go.
func (s *Set) Describe(chan<- *prometheus.Desc) {}

// Collect sends the samples of every source in the set.
func (s *Set) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	cs := make([]*Collector, 0, len(s.members))
	for _, c := range s.members {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.Collect(ch)
	}
}
