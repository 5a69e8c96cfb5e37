// Package rsyslogtest runs rsyslogd, Debian's syslog daemon, on loopback,
// as the real syslog server that the exporter's syslog sink is tested
// against (sink_syslog_test.go in github.com/fanout-go/fanout/exporter).
//
// # Daemon
//
// rsyslogd comes from Debian's rsyslog package, fetched with apt-get
// download and unpacked with dpkg -x by binary.sh (embedded in the
// package; `make e2e-binaries` at the repository root runs the same file)
// into the user's cache directory, os.UserCacheDir()/fanout-e2e/rsyslog:
// nothing is installed on the system, no daemon of the system's is
// started. That takes seconds; [Binary] runs the script when the daemon is
// missing, so tests never skip for want of it. On a machine without
// apt-get and dpkg, [Start] fails the test with the script's message.
//
// # Server
//
// [Start] runs the daemon in the foreground with a configuration of its
// own: a TCP input (imtcp) and a UDP input (imudp) on one port of
// 127.0.0.1, a Unix stream socket (imptcp) and a Unix datagram socket
// (imuxsock, as /dev/log), every message written to a file with the
// fields rsyslogd parsed, which [Server.Messages] reads back:
//
//	func TestSomething(t *testing.T) {
//		srv := rsyslogtest.Start(t) // stopped by t.Cleanup
//		// send to srv.TCPAddr() ...
//		ms, err := srv.WaitMessages(ctx, 1)
//		...
//	}
//
// [Server.Restart] stops the daemon and starts it again on the same port
// and sockets, closing the connections to it. Every process and goroutine
// a [Server] starts ends in its cleanup, so the package can be used under
// goleak.
package rsyslogtest
