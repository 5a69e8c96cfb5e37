package exporter

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// memoryKeys returns the keys of the records s keeps, oldest first.
func memoryKeys(s *MemorySink) []string {
	var keys []string
	for _, r := range s.Records() {
		keys = append(keys, r.Occurrence.Key())
	}
	return keys
}

// Their inMemory receiver: the pipeline sets Ref to the sink it built,
// from which a program reads every record the routes sent it.
func TestInMemoryReceiverKeepsTheRecordsForTheProgramThroughRef(t *testing.T) {
	c := parseOK(t, "clusterName: prod\nroute: {match: [{receiver: mem}]}\nreceivers:\n  - name: mem\n    inMemory: {}\n")
	p, err := NewPipeline(c, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := publishN(t, p, 20)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ref := c.Receivers[0].InMemory.Ref
	if ref == nil || !slices.Equal(memoryKeys(ref), want) {
		t.Fatalf("ref %v, want the %d occurrences published", ref, len(want))
	}
	if r := ref.Records()[0]; string(r.Record) != string(r.Occurrence.EventJSON("prod")) {
		t.Errorf("record %s, want the event record with the cluster name", r.Record)
	}
}

func TestInMemoryKeepsTheLastLimitRecordsAndCountsTheEvicted(t *testing.T) {
	s := NewMemorySink(3, nil)
	for i := range 5 {
		if n, err := s.Write(t.Context(), []*Occurrence{occ(fmt.Sprint("e", i), 1, "ns")}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	}
	if got := memoryKeys(s); !slices.Equal(got, []string{"e2/1", "e3/1", "e4/1"}) || s.Evicted() != 2 {
		t.Errorf("kept %v, evicted %d; want the last 3, 2 evicted", got, s.Evicted())
	}
}

func TestInMemoryConcurrentWritesAreAllKept(t *testing.T) {
	s := NewMemorySink(1000, nil)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				_, _ = s.Write(context.Background(), []*Occurrence{occ(fmt.Sprint(w, "-", i), 1, "ns")})
			}
		})
	}
	wg.Wait()
	if n := len(s.Records()); n != 200 {
		t.Errorf("%d records kept, want 200", n)
	}
}

func TestInMemoryLimitDefaultsAndMustNotBeNegative(t *testing.T) {
	c := parseOK(t, "receivers: [{name: m, inMemory: {}}]\n")
	if l := c.Receivers[0].InMemory.Limit; l != DefaultMemoryLimit || len(otherWarnings(c.Warnings)) != 0 {
		t.Errorf("limit %d, warnings %q", l, c.Warnings)
	}
	wantConfigErrors(t, map[string]string{"inMemory: {limit: -1}": "inMemory.limit -1 is negative"})
}
