package util_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientutil "k8s.io/client-go/tools/record/util"

	"github.com/fanout-go/fanout/k8s/internal/apitest"
	"github.com/fanout-go/fanout/k8s/record/util"
)

func TestSameAsClientGo(t *testing.T) {
	for _, typ := range []string{"Normal", "Warning", "", "normal", "Bogus"} {
		assert.Equal(t, clientutil.ValidateEventType(typ), util.ValidateEventType(typ), typ)
	}
	gr := schema.GroupResource{Resource: "events"}
	var nilStatus *apierrors.StatusError
	for _, err := range []error{nil, errors.New("x"), apierrors.NewNotFound(gr, "e"), apierrors.NewConflict(gr, "e", nil),
		fmt.Errorf("wrapped: %w", apierrors.NewNotFound(gr, "e")), nilStatus} {
		if err == error(nilStatus) && nilStatus == nil {
			// client-go dereferences a typed nil and panics; ours says no.
			assert.False(t, util.IsKeyNotFoundError(err))
			continue
		}
		assert.Equal(t, clientutil.IsKeyNotFoundError(err), util.IsKeyNotFoundError(err), "%v", err)
	}
	names := []string{"web", "web-1.x", strings.Repeat("a", 80), strings.Repeat("a", 230), strings.Repeat("a", 260), "Upper", "under_score", ""}
	for _, name := range names {
		for _, nano := range []int64{0x1234, 1_795_000_000_123_456_789, -5} {
			ours, theirs := util.GenerateEventName(name, nano), clientutil.GenerateEventName(name, nano)
			if len(theirs) == 36 && strings.Count(theirs, "-") == 4 { // a random UUID
				assert.Len(t, ours, 36, name)
				assert.NotEqual(t, theirs, ours)
				continue
			}
			assert.Equal(t, theirs, ours, name)
		}
	}
}

func TestEveryClientGoNameExists(t *testing.T) {
	apitest.SameNames(t, "k8s.io/client-go/tools/record/util", ".", nil)
}

func TestGenerateEventNameAllocatesOnlyTheName(t *testing.T) {
	var name string
	if n := testing.AllocsPerRun(100, func() { name = util.GenerateEventName("web-5d9f8c7b6-x2x4q", 0x187a3c2d4e5f6071) }); n != 1 {
		t.Errorf("GenerateEventName allocated %v times, want 1 (the name)", n)
	}
	if want := "web-5d9f8c7b6-x2x4q.187a3c2d4e5f6071"; name != want {
		t.Errorf("GenerateEventName = %q, want %q", name, want)
	}
}
