//go:build unix

package exporter

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the daemon has closed the stream connection
// c (or reset it): a daemon never sends on it, so any end of stream is
// that. It peeks without blocking; a datagram connection is never closed.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok || datagram(c) {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		wouldBlock := errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK)
		closed = (rerr == nil && n == 0) || (rerr != nil && !wouldBlock)
		return true
	})
	return closed || err != nil
}
