package fanoutnats

import (
	"strings"
	"testing"
	"time"
)

// A zero setting means its default and a negative one is an error that
// names the field, before anything is connected or started.
func TestNegativeSettingsAreErrorsNamingTheField(t *testing.T) {
	if err := checkSettings("Forward", setting{"ForwardConfig.Batch", 0}, setting{"ForwardConfig.AckTimeout", int64(time.Second)}); err != nil {
		t.Errorf("zero and positive settings: %v, want nil", err)
	}
	err := checkSettings("Forward", setting{"ForwardConfig.Batch", 1}, setting{"ForwardConfig.RetryWait", -1})
	if err == nil || !strings.Contains(err.Error(), "Forward: ForwardConfig.RetryWait is -1") {
		t.Errorf("a negative RetryWait: %v, want an error naming it", err)
	}
	if got := orDefault(0, DefaultBatch); got != DefaultBatch {
		t.Errorf("orDefault(0) = %d, want the default %d", got, DefaultBatch)
	}
}
