package adapt

import (
	"fmt"
	"testing"
)

func TestSprintfIsFmtSprintf(t *testing.T) {
	for _, tc := range []struct {
		format string
		args   []any
	}{
		{"synced", nil},
		{"", nil},
		{"100%% done", nil},
		{"missing %d", nil},
		{"trailing %", nil},
		{"no verb", []any{1}},
		{"pod %s on %s", []any{"web", "node-1"}},
		{"%v", []any{nil}},
	} {
		if got, want := Sprintf(tc.format, tc.args), fmt.Sprintf(tc.format, tc.args...); got != want {
			t.Errorf("Sprintf(%q, %v) = %q, fmt.Sprintf gives %q", tc.format, tc.args, got, want)
		}
	}
}

func TestSprintfReturnsAFormatWithNothingToFormatWithoutAllocating(t *testing.T) {
	format := "Successfully assigned the pod"
	var got string
	if n := testing.AllocsPerRun(100, func() { got = Sprintf(format, nil) }); n != 0 {
		t.Errorf("Sprintf of a format without verbs allocated %v times, want 0", n)
	}
	if got != format {
		t.Errorf("Sprintf(%q) = %q", format, got)
	}
}
