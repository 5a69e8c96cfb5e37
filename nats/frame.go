package fanoutnats

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// FrameHeader is the header of a NATS message that carries a frame: several
// values for one subject, in order. Its value is the number of values, in decimal. The
// payload is each value's encoding ([Codec]) preceded by its length in
// bytes as an unsigned varint ([binary.AppendUvarint]). [Subscribe] and
// [Consume] read frames and plain messages alike.
const FrameHeader = "Fanout-Frame"

// appendFramePart appends one encoded value to a frame's payload.
func appendFramePart(body, data []byte) []byte {
	body = binary.AppendUvarint(body, uint64(len(data)))
	return append(body, data...)
}

// frameCount returns the value of h's FrameHeader, and whether h has one.
func frameCount(h nats.Header) (string, bool) {
	v, ok := h[FrameHeader]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// valuesIn returns the number of values a message carries, as its header
// says: a frame's count (1 if it is not a number), or 1.
func valuesIn(h nats.Header) uint64 {
	count, ok := frameCount(h)
	if !ok {
		return 1
	}
	n, err := strconv.ParseUint(count, 10, 32)
	if err != nil || n == 0 {
		return 1
	}
	return n
}

// splitFrame appends the encoded values of a frame's payload to parts, and
// returns an error wrapping [ErrDecode] unless body holds exactly the
// number of values count says (each takes one byte at least).
func splitFrame(count string, body []byte, parts [][]byte) ([][]byte, error) {
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > len(body) {
		return parts, fmt.Errorf("%w: frame header %s=%q for a %d-byte payload", ErrDecode, FrameHeader, count, len(body))
	}
	start := len(parts)
	for len(body) > 0 {
		size, k := binary.Uvarint(body)
		if k <= 0 || size > uint64(len(body)-k) {
			return parts[:start], fmt.Errorf("%w: malformed frame: value %d overruns the payload", ErrDecode, len(parts)-start+1)
		}
		end := k + int(size)
		parts = append(parts, body[k:end:end])
		body = body[end:]
		if len(parts)-start > n {
			break
		}
	}
	if got := len(parts) - start; got != n {
		return parts[:start], fmt.Errorf("%w: malformed frame: %d values, header says %d", ErrDecode, got, n)
	}
	return parts, nil
}
