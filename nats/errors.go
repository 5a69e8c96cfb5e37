package fanoutnats

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Errors of this package. Compare them with errors.Is; the errors reported
// for a value are [*Error] values wrapping them or the NATS client's errors
// (such as [nats.ErrMaxPayload] or [nats.ErrPermissionViolation]).
var (
	// ErrEncode wraps an error (or a panic) of a [Codec]'s Encode.
	ErrEncode = errors.New("fanoutnats: encode failed")
	// ErrDecode wraps an error (or a panic) of a [Codec]'s Decode.
	ErrDecode = errors.New("fanoutnats: decode failed")
	// ErrInvalidSubject reports a subject that cannot be published to:
	// empty, with white space or an empty token, or with a wildcard.
	ErrInvalidSubject = errors.New("fanoutnats: invalid subject")
	// ErrClosed is reported (wrapped in an [*Error]) for the values a
	// bridge gave up because its Close context ended.
	ErrClosed = errors.New("fanoutnats: closed")
	// ErrAckUnconfirmed is reported (wrapped in an [*Error] whose Sequence
	// is the stream sequence concerned) when a durable [Consumer] could not
	// get the server to confirm its ack floor, at Close or after a
	// reconnect, and returned by Close for the last one: the durable's next
	// consumer may then get again values this one delivered.
	ErrAckUnconfirmed = errors.New("fanoutnats: acknowledgement not confirmed")
)

// errNilContext is returned for a nil context: pass context.Background()
// for no bound.
var errNilContext = errors.New("fanoutnats: nil context; pass context.Background() for no bound")

// Error describes a value or a message that a bridge could not carry. The
// OnError callbacks of the configurations receive one, as an error.
type Error struct {
	// Op names the step that failed: "subject", "encode", "publish",
	// "flush", "decode", "deliver", "ack", "nak" or "consume".
	Op string
	// Subject is the NATS subject, when known.
	Subject string
	// Sequence is the JetStream stream sequence of the message, when known,
	// and 0 otherwise.
	Sequence uint64
	// Err is the cause.
	Err error
}

// Error returns "fanoutnats: OP SUBJECT: CAUSE".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("fanoutnats: ")
	b.WriteString(e.Op)
	if e.Subject != "" {
		fmt.Fprintf(&b, " %q", e.Subject)
	}
	if e.Sequence != 0 {
		fmt.Fprintf(&b, " (stream sequence %d)", e.Sequence)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether a failed publish is worth trying again. It is
// the classification [Forwarder] uses in JetStream mode and the one
// [RetryPolicy] gives a [fanout.Recorder] writing to a [Sink]:
//
//   - retried: time-outs (including [context.DeadlineExceeded] and
//     [jetstream.ErrAsyncPublishTimeout]), no responders
//     ([nats.ErrNoResponders], [jetstream.ErrNoStreamResponse]: no stream
//     listens on the subject, yet), a connection that is reconnecting or
//     was disconnected, a full reconnect buffer, and JetStream API errors
//     with a 5xx code (JetStream temporarily unavailable);
//   - not retried: [ErrEncode], [ErrInvalidSubject], a MsgID function
//     that panicked, a permissions
//     violation, a payload larger than the server or the stream accepts,
//     a bad subject or message, a closed connection, [context.Canceled],
//     and JetStream API errors with a 4xx code (the request itself is
//     wrong, so it would fail again);
//   - any other error is retried: a policy bounds the tries, and giving up
//     on an unknown error would lose the value.
//
// Retryable(nil) is false.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	for _, e := range permanentErrors {
		if errors.Is(err, e) {
			return false
		}
	}
	for _, e := range transientErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.Code >= 400 && apiErr.Code < 500 {
		return apiErr.Code == 408 // request timeout
	}
	return true
}

// errMsgIDPanicked wraps the panic of a MsgID function: the same value
// would make it panic again.
var errMsgIDPanicked = errors.New("fanoutnats: MsgID panicked")

var permanentErrors = []error{
	ErrEncode,
	errMsgIDPanicked,
	ErrInvalidSubject,
	nats.ErrPermissionViolation,
	nats.ErrMaxPayload,
	nats.ErrBadSubject,
	nats.ErrInvalidMsg,
	nats.ErrConnectionClosed,
	nats.ErrConnectionDraining,
	nats.ErrInvalidConnection,
	jetstream.ErrStreamMessageExceedsMaximum,
	jetstream.ErrMaxBytesExceeded,
	context.Canceled,
}

var transientErrors = []error{
	context.DeadlineExceeded,
	nats.ErrTimeout,
	nats.ErrNoResponders,
	nats.ErrDisconnected,
	nats.ErrConnectionReconnecting,
	nats.ErrReconnectBufExceeded,
	nats.ErrSlowConsumer,
	jetstream.ErrNoStreamResponse,
	jetstream.ErrAsyncPublishTimeout,
	jetstream.ErrTooManyStalledMsgs,
}

// ValidSubject reports whether s is a subject values can be published to:
// not empty, no white space, no empty token and no wildcard token (* or >).
// A [Forwarder] or [Sink] refuses any other; an application can check its
// configuration with it before it connects.
func ValidSubject(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n\f\v") {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
	}
	return true
}

// validFilter reports whether s is a subject a subscription or a consumer
// may filter on: as [ValidSubject], but a token may be the wildcard *, and
// the last one >. A server answers any other with an error that makes the
// client close the whole connection, which belongs to the caller.
func validFilter(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n\f\v") {
		return false
	}
	toks := strings.Split(s, ".")
	for i, tok := range toks {
		if tok == "" || tok == ">" && i < len(toks)-1 {
			return false
		}
	}
	return true
}

// filterErr returns an error naming the first subject of subjects that
// validFilter refuses, for op's setting name; nil if there is none.
func filterErr(op, name string, subjects ...string) error {
	for _, s := range subjects {
		if !validFilter(s) {
			return fmt.Errorf("fanoutnats: %s: %s %q is not a subject to subscribe to (empty, white space, an empty token, or > before the last token)", op, name, s)
		}
	}
	return nil
}

// denied returns the connection's last error if it is a permissions
// violation for verb ("Publish" or "Subscription") on subject that the
// server reported since before was read from nc.LastError, and nil
// otherwise. The server reports permission errors asynchronously, as the
// connection's last error, so this is how a bridge learns of them; it needs
// a round trip (a flush or a request) after the operation.
func denied(nc *nats.Conn, before error, verb, subject string) error {
	after := nc.LastError()
	if after == nil || sameError(after, before) || !errors.Is(after, nats.ErrPermissionViolation) {
		return nil
	}
	if !strings.Contains(strings.ToLower(after.Error()), strings.ToLower(verb)+" to \""+strings.ToLower(subject)+"\"") {
		return nil
	}
	return after
}

// sameError reports whether a and b are the same error value, without
// panicking on error types that cannot be compared.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	ta := reflect.TypeOf(a)
	if ta != reflect.TypeOf(b) || !ta.Comparable() {
		return false
	}
	return a == b
}
