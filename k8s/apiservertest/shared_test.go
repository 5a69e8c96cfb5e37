//go:build e2e

package apiservertest

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A test run again in the same process (go test -count 2) asks for the
// namespace names its first run created, which never go away: Namespace
// then creates a fresh one beside each, and every name it returns is a
// namespace of its own.
func TestNamespaceCreatesAFreshNamespaceWhenTheNameIsTaken(t *testing.T) {
	client := Start(t).MustClientset(t)
	var got []string
	for range 3 {
		got = append(got, Namespace(t, client, "again"))
	}
	want := []string{"again", "again-2", "again-3"}
	if !slices.Equal(got, want) {
		t.Fatalf("Namespace returned %q, want %q", got, want)
	}
	for _, ns := range got {
		if _, err := client.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s: %v", ns, err)
		}
	}
}
