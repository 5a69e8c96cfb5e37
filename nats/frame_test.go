package fanoutnats

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
)

func TestSplitFrameRejectsWhatItsHeaderDoesNotDescribe(t *testing.T) {
	two := appendFramePart(appendFramePart(nil, []byte("ab")), []byte("c"))
	tests := []struct {
		name, count string
		body        []byte
	}{
		{"not a number", "two", two},
		{"zero", "0", two},
		{"negative", "-1", two},
		{"more values than bytes", "9", two},
		{"fewer values than the header", "3", two},
		{"more values than the header", "1", two},
		{"a length past the end", "1", []byte{5, 'a'}},
		{"a truncated varint", "1", []byte{0x80}},
		{"trailing bytes", "2", append(two, 7)},
		{"empty", "1", nil},
	}
	for _, tt := range tests {
		if parts, err := splitFrame(tt.count, tt.body, nil); !errors.Is(err, ErrDecode) || len(parts) != 0 {
			t.Errorf("%s: parts %q, err %v: want none and ErrDecode", tt.name, parts, err)
		}
	}
	parts, err := splitFrame("2", two, [][]byte{[]byte("kept")})
	if err != nil || len(parts) != 3 || string(parts[1]) != "ab" || string(parts[2]) != "c" {
		t.Fatalf("parts %q, err %v", parts, err)
	}
}

// Every frame built by appendFramePart splits back into its parts, and no
// input makes splitFrame panic or return parts with an error.
func FuzzSplitFrame(f *testing.F) {
	f.Add([]byte("abc"), 3, []byte{2, 'a', 'b'})
	f.Add([]byte{}, 1, []byte{0})
	f.Add([]byte{0xff}, 200, []byte{0x80, 0x80})
	f.Fuzz(func(t *testing.T, part []byte, n int, raw []byte) {
		n = 1 + abs(n)%50
		var body []byte
		var want [][]byte
		for i := range n {
			p := part[:min(len(part), i)]
			want = append(want, p)
			body = appendFramePart(body, p)
		}
		got, err := splitFrame(strconv.Itoa(n), body, nil)
		if err != nil || len(got) != n {
			t.Fatalf("frame of %d: %d parts, %v", n, len(got), err)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("part %d: %q, want %q", i, got[i], want[i])
			}
		}
		if parts, err := splitFrame(strconv.Itoa(n), raw, nil); err != nil && len(parts) != 0 {
			t.Fatalf("an error with %d parts", len(parts))
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -(n + 1)
	}
	return n
}
