package fanoutnats

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestRetryableClassifiesPublishErrors(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.DeadlineExceeded, true},
		{nats.ErrTimeout, true},
		{nats.ErrNoResponders, true},
		{jetstream.ErrNoStreamResponse, true},
		{jetstream.ErrAsyncPublishTimeout, true},
		{nats.ErrDisconnected, true},
		{nats.ErrConnectionReconnecting, true},
		{nats.ErrReconnectBufExceeded, true},
		{&jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 408, Description: "request timeout"}, true},
		{errors.New("something unknown"), true},
		{nats.ErrMaxPayload, false},
		{jetstream.ErrStreamMessageExceedsMaximum, false},
		{fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}), false},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, false},
		{fmt.Errorf("%w: Permissions Violation for Publish to \"x\"", nats.ErrPermissionViolation), false},
		{nats.ErrBadSubject, false},
		{nats.ErrConnectionClosed, false},
		{context.Canceled, false},
		{ErrEncode, false},
		{ErrInvalidSubject, false},
		{&Error{Op: "publish", Err: nats.ErrMaxPayload}, false},
		{&Error{Op: "publish", Err: nats.ErrTimeout}, true},
	}
	for _, tt := range tests {
		if got := Retryable(tt.err); got != tt.want {
			t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestValidSubjectRejectsWhatCannotBePublishedTo(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "a.b.c": true, "a-b_c.1": true,
		"": false, "a b": false, "a.": false, ".a": false, "a..b": false,
		"a.*": false, "a.>": false, ">": false, "a\tb": false, "a\nb": false,
	} {
		if got := ValidSubject(s); got != want {
			t.Errorf("ValidSubject(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestErrorTextNamesStepSubjectAndSequence(t *testing.T) {
	e := &Error{Op: "decode", Subject: "ev.a", Sequence: 7, Err: ErrDecode}
	want := `fanoutnats: decode "ev.a" (stream sequence 7): fanoutnats: decode failed`
	if e.Error() != want {
		t.Fatalf("got %q, want %q", e.Error(), want)
	}
	if !errors.Is(e, ErrDecode) {
		t.Fatal("Error does not unwrap to its cause")
	}
}

// uncomparable is an error type that == would panic on.
type uncomparable struct{ parts []string }

func (u uncomparable) Error() string { return "uncomparable" }

func TestSameErrorDoesNotPanicOnUncomparableErrors(t *testing.T) {
	a, b := uncomparable{[]string{"x"}}, uncomparable{[]string{"x"}}
	if sameError(a, b) {
		t.Fatal("two uncomparable errors reported as the same value")
	}
	e := errors.New("x")
	if !sameError(e, e) || sameError(e, errors.New("x")) || !sameError(nil, nil) || sameError(e, nil) {
		t.Fatal("sameError does not compare identities")
	}
}
