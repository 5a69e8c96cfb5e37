package fanoutnats

import (
	"strings"
	"testing"
	"time"
)

// A zero setting means its default and a negative one is an error that
// names the field, before anything is connected or started.
func TestNegativeSettingsAreErrorsNamingTheField(t *testing.T) {
	if err := checkSettings("Forward", setting{name: "ForwardConfig.Batch"}, setting{name: "ForwardConfig.AckTimeout", value: int64(time.Second)}); err != nil {
		t.Errorf("zero and positive settings: %v, want nil", err)
	}
	err := checkSettings("Forward", setting{name: "ForwardConfig.Batch", value: 1}, setting{name: "ForwardConfig.RetryWait", value: -1})
	if err == nil || !strings.Contains(err.Error(), "Forward: ForwardConfig.RetryWait is -1") {
		t.Errorf("a negative RetryWait: %v, want an error naming it", err)
	}
	if got := orDefault(0, DefaultBatch); got != DefaultBatch {
		t.Errorf("orDefault(0) = %d, want the default %d", got, DefaultBatch)
	}
}

// A size is accepted up to its maximum, and beyond it is an error naming
// the field and the maximum.
func TestSizesAboveTheirMaximumAreErrorsNamingTheField(t *testing.T) {
	if err := checkSettings("Forward", bounded("ForwardConfig.Batch", MaxBatch, "MaxBatch", MaxBatch)); err != nil {
		t.Errorf("Batch = MaxBatch: %v, want nil", err)
	}
	err := checkSettings("Forward", bounded("ForwardConfig.Batch", MaxBatch+1, "MaxBatch", MaxBatch))
	if err == nil || !strings.Contains(err.Error(), "Forward: ForwardConfig.Batch is 16777217; it must be 0 (the default) to MaxBatch (16777216)") {
		t.Errorf("Batch = MaxBatch+1: %v, want an error naming it and MaxBatch", err)
	}
}
