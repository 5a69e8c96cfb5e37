package fanoutnats

import (
	"encoding/json"
	"fmt"

	"github.com/fanout-go/fanout/internal/guard"
)

// Codec turns values into message payloads and back. Either function may be
// nil, and then encoding/json is used for that direction: the zero Codec is
// the JSON codec. A function that panics is treated as one that returned an
// error: the value is counted and reported, and the bridge goes on.
type Codec[T any] struct {
	// Encode returns the payload for v. Nil means json.Marshal.
	Encode func(v T) ([]byte, error)
	// Decode returns the value a payload holds. Nil means json.Unmarshal
	// into a zero T.
	Decode func(data []byte) (T, error)
}

// JSON returns the JSON codec, the same as the zero [Codec].
func JSON[T any]() Codec[T] {
	return Codec[T]{Encode: jsonEncode[T], Decode: jsonDecode[T]}
}

func jsonEncode[T any](v T) ([]byte, error) { return json.Marshal(v) }

func jsonDecode[T any](data []byte) (T, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}

// encode runs the encoder, turning an error or a panic into an error that
// wraps [ErrEncode].
func (c Codec[T]) encode(v T) (data []byte, err error) {
	f := c.Encode
	if f == nil {
		f = jsonEncode[T]
	}
	if perr := guard.Call(func() { data, err = f(v) }); perr != nil {
		return nil, fmt.Errorf("%w: %w", ErrEncode, perr)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEncode, err)
	}
	return data, nil
}

// decode runs the decoder, turning an error or a panic into an error that
// wraps [ErrDecode].
func (c Codec[T]) decode(data []byte) (v T, err error) {
	f := c.Decode
	if f == nil {
		f = jsonDecode[T]
	}
	if perr := guard.Call(func() { v, err = f(data) }); perr != nil {
		var zero T
		return zero, fmt.Errorf("%w: %w", ErrDecode, perr)
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return v, nil
}
