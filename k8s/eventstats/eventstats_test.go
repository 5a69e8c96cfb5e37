package eventstats_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fanout-go/fanout/k8s/eventstats"
)

// Every loss counter (Invalid, Refused and each Dropped* field) is part of
// Dropped, and nothing else is: a counter added later cannot be forgotten.
func TestDroppedSumsEveryLossCounter(t *testing.T) {
	var s eventstats.Stats
	v := reflect.ValueOf(&s).Elem()
	var want uint64
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		bit := uint64(1) << i
		switch f.Kind() {
		case reflect.Uint64:
			f.SetUint(bit)
		case reflect.Int:
			f.SetInt(int64(bit))
		default:
			t.Fatalf("field %s has unexpected kind %s", name, f.Kind())
		}
		if name == "Invalid" || name == "Refused" || strings.HasPrefix(name, "Dropped") {
			want += bit
		}
	}
	if got := s.Dropped(); got != want {
		t.Errorf("Dropped() = %#b, want %#b (the loss counters' bits)", got, want)
	}
}
