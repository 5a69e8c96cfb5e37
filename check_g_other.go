//go:build fanoutcheck && !amd64

package fanout

import (
	"bytes"
	"runtime"
	"strconv"
)

// curg returns the calling goroutine's id, read off its stack trace: slow
// (microseconds), but it needs no assembly.
func curg() uintptr {
	var buf [64]byte
	s := buf[:runtime.Stack(buf[:], false)]
	s = bytes.TrimPrefix(s, []byte("goroutine "))
	s = s[:bytes.IndexByte(s, ' ')]
	id, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil {
		panic("fanout: fanoutcheck: cannot read the goroutine id")
	}
	return uintptr(id)
}
