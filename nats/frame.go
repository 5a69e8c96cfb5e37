package fanoutnats

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/fanout-go/fanout/internal/guard"
	"github.com/nats-io/nats.go"
)

// FrameHeader is the header of a NATS message that carries a frame: several
// values for one subject, in order, published by a [Forwarder] with
// [ForwardConfig].Frame. Its value is the number of values, in decimal. The
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

// outMsg is one NATS message a [Forwarder] publishes: one value, or a
// frame of several values for one subject.
type outMsg struct {
	subject string
	data    []byte
	values  int
	id      string // JetStream message ID
	// idAt is where the MsgID's of its values begin in the forwarder's
	// ids (JetStream mode with MsgID only).
	idAt int
}

// msg returns the NATS message, with FrameHeader if it is a frame.
func (m *outMsg) msg() *nats.Msg {
	nm := &nats.Msg{Subject: m.subject, Data: m.data, Header: nats.Header{}}
	if m.values > 1 {
		nm.Header[FrameHeader] = []string{strconv.Itoa(m.values)}
	}
	return nm
}

// frameRoom is what a frame leaves of the server's maximum payload for the
// headers (FrameHeader, Nats-Msg-Id and the NATS/1.0 line).
const frameRoom = 512

// pack encodes a batch into the messages to publish, appended to out: one
// per value, or with Frame above 1, frames of up to Frame consecutive
// values for the same subject within the server's maximum payload. A frame
// of one value is a plain message. A value whose subject, encoding or
// message ID fails is counted as failed and reported.
func (f *Forwarder[T]) pack(batch []T, out []outMsg) []outMsg {
	limit := int(f.nc.MaxPayload()) - frameRoom
	clear(f.ids)
	f.ids = f.ids[:0]
	for _, v := range batch {
		subject, data, ok := f.prepare(v)
		if !ok || !f.keepID(v, subject) {
			continue
		}
		if k := len(out) - 1; k >= 0 && f.joins(&out[k], subject, data, limit) {
			f.addToFrame(&out[k], data)
			continue
		}
		out = append(out, outMsg{subject: subject, data: data, values: 1, idAt: len(f.ids) - 1})
	}
	f.setIDs(out)
	return out
}

// keepID appends v's MsgID to f.ids in JetStream mode with MsgID, and
// reports whether it could: a panic of MsgID fails the value.
func (f *Forwarder[T]) keepID(v T, subject string) bool {
	if f.js == nil || f.cfg.MsgID == nil {
		return true
	}
	var id string
	if perr := guard.Call(func() { id = f.cfg.MsgID(v) }); perr != nil {
		f.fail("publish", subject, fmt.Errorf("%w: %w", errMsgIDPanicked, perr))
		return false
	}
	f.ids = append(f.ids, id)
	return true
}

// setIDs gives each message its JetStream message ID: without MsgID, one
// of the forwarder's own; with it, the one frameID derives from the IDs of
// its values.
func (f *Forwarder[T]) setIDs(out []outMsg) {
	if f.js == nil {
		return
	}
	for i := range out {
		m := &out[i]
		if f.cfg.MsgID == nil {
			m.id = f.ownID()
			continue
		}
		m.id = frameID(f.idsOf(m))
	}
}

// idsOf returns the MsgID's of the values of m, or nil without MsgID.
func (f *Forwarder[T]) idsOf(m *outMsg) []string {
	if f.js == nil || f.cfg.MsgID == nil {
		return nil
	}
	return f.ids[m.idAt : m.idAt+m.values : m.idAt+m.values]
}

// frameID returns the message ID of a message holding values whose MsgID's
// are ids: a value's own ID, or for a frame its first value's followed by
// "+" and its number of values. A frame holding a value without an ID
// (MsgID returned "") has none, as that value alone has none: a derived ID
// would make the stream take a frame of other values, without IDs, for a
// duplicate of one with the same first value and size.
func frameID(ids []string) string {
	if len(ids) == 1 {
		return ids[0]
	}
	if slices.Contains(ids, "") {
		return ""
	}
	return ids[0] + "+" + strconv.Itoa(len(ids))
}

// joins reports whether a value encoded as data, for subject, goes into
// the frame m.
func (f *Forwarder[T]) joins(m *outMsg, subject string, data []byte, limit int) bool {
	if f.cfg.Frame < 2 || m.values >= f.cfg.Frame || m.subject != subject {
		return false
	}
	size := len(m.data) + len(data) + 2*binary.MaxVarintLen64
	return size <= limit
}

// addToFrame appends a value to m, making m a frame if it held one value.
// The frame's buffer starts with room for the two values and grows by
// appending: sized for Frame values up front, each frame of two values
// allocated Frame times their size (5.6 KB for 256 values of 22 bytes).
func (f *Forwarder[T]) addToFrame(m *outMsg, data []byte) {
	if m.values == 1 {
		body := make([]byte, 0, len(m.data)+len(data)+2*binary.MaxVarintLen32)
		m.data = appendFramePart(body, m.data)
	}
	m.data = appendFramePart(m.data, data)
	m.values++
}
