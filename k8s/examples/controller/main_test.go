package main

import (
	"bytes"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo records an event per pod through the adapter and finds them
// stored by the (fake) API server.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), &out, ""); err != nil {
		t.Fatal(err)
	}
	want := `event web-1: Normal Observed "pod web-1 is Running"
event web-2: Normal Observed "pod web-2 is Pending"
recorded 2, dropped 0
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
