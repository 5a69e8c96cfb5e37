package fanoutnats

import (
	"errors"
	"testing"
)

type point struct{ X, Y int }

func TestZeroCodecIsJSON(t *testing.T) {
	var c Codec[point]
	data, err := c.encode(point{1, 2})
	if err != nil || string(data) != `{"X":1,"Y":2}` {
		t.Fatalf("encode = %q, %v", data, err)
	}
	v, err := c.decode(data)
	if err != nil || v != (point{1, 2}) {
		t.Fatalf("decode = %v, %v", v, err)
	}
	j := JSON[point]()
	if data2, _ := j.encode(point{1, 2}); string(data2) != string(data) {
		t.Fatalf("JSON() encodes %q, the zero codec %q", data2, data)
	}
}

func TestCodecErrorsWrapErrEncodeAndErrDecode(t *testing.T) {
	boom := errors.New("boom")
	c := Codec[point]{
		Encode: func(point) ([]byte, error) { return nil, boom },
		Decode: func([]byte) (point, error) { return point{9, 9}, boom },
	}
	if _, err := c.encode(point{}); !errors.Is(err, ErrEncode) || !errors.Is(err, boom) {
		t.Fatalf("encode error %v: want ErrEncode wrapping the cause", err)
	}
	v, err := c.decode(nil)
	if !errors.Is(err, ErrDecode) || !errors.Is(err, boom) {
		t.Fatalf("decode error %v: want ErrDecode wrapping the cause", err)
	}
	if v != (point{}) {
		t.Fatalf("decode returned %v with an error, want the zero value", v)
	}
	if _, err := (Codec[point]{}).decode([]byte("not json")); !errors.Is(err, ErrDecode) {
		t.Fatalf("garbage JSON: %v, want ErrDecode", err)
	}
}

func TestCodecPanicsBecomeErrors(t *testing.T) {
	c := Codec[point]{
		Encode: func(point) ([]byte, error) { panic("encoder bug") },
		Decode: func([]byte) (point, error) { panic("decoder bug") },
	}
	if _, err := c.encode(point{}); !errors.Is(err, ErrEncode) {
		t.Fatalf("panicking encoder: %v, want ErrEncode", err)
	}
	if _, err := c.decode([]byte("{}")); !errors.Is(err, ErrDecode) {
		t.Fatalf("panicking decoder: %v, want ErrDecode", err)
	}
}
