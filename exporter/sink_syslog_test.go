package exporter

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/syslog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter/internal/rsyslogtest"
)

// syslogReceiver builds the sink of a receiver configured with the YAML
// body of its syslog key.
func syslogReceiver(t *testing.T, body string) Sink {
	t.Helper()
	c := parseOK(t, "receivers:\n  - name: s\n    syslog: "+body+"\n")
	s, err := c.Receivers[0].build(c.ClusterName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// waitSyslog waits until rsyslogd stored n messages.
func waitSyslog(t *testing.T, srv *rsyslogtest.Server, n int) []rsyslogtest.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ms, err := srv.WaitMessages(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// On each network, rsyslogd stores one message per occurrence, with
// kubernetes-event-exporter's priority (local0, severity bits 0), the tag,
// and the record as the text.
func TestSyslogDeliversEachOccurrenceToRsyslogOnEveryNetwork(t *testing.T) {
	srv := rsyslogtest.Start(t)
	host, _ := os.Hostname()
	networks := map[string]string{"tcp": srv.TCPAddr(), "udp": srv.UDPAddr(), "unix": srv.UnixPath(),
		"unixgram": srv.UnixgramPath()}
	inputs := map[string]string{"tcp": "imtcp", "udp": "imudp", "unix": "imptcp", "unixgram": "imuxsock"}
	stored := 0
	for network, addr := range networks {
		s := syslogReceiver(t, fmt.Sprintf("{network: %s, address: %q, tag: k8s.event}", network, addr))
		batch := []*Occurrence{occ("a-"+network, 1, "ns"), occ("b-"+network, 2, "ns")}
		if n, err := s.Write(t.Context(), batch); n != 2 || err != nil {
			t.Fatalf("%s: %d, %v", network, n, err)
		}
		stored += 2
		ms := waitSyslog(t, srv, stored)
		for i, m := range ms[stored-2:] {
			if m.Input != inputs[network] || m.Priority != 16*8 || m.Tag != fmt.Sprintf("k8s.event[%d]:", os.Getpid()) ||
				m.Text != string(batch[i].EventJSON("")) || (network == "tcp" || network == "udp") && m.Hostname != host {
				t.Errorf("%s: message %+v", network, m)
			}
		}
	}
}

// syslogTimestamp matches the timestamp of a message of Go's log/syslog:
// RFC 3339 over a network, time.Stamp on a Unix socket.
var syslogTimestamp = regexp.MustCompile(`^(<\d+>)(\S+|\w{3} [ \d]\d \d\d:\d\d:\d\d) `)

// A message is byte for byte what Go's log/syslog, with which
// kubernetes-event-exporter sends, writes for the same text (timestamps
// aside): over TCP with the host name and an RFC 3339 time, on a Unix
// socket in the local form.
func TestSyslogFramesAMessageAsGoLogSyslog(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		addr := "127.0.0.1:0"
		if network == "unix" {
			addr = filepath.Join(t.TempDir(), "s")
		}
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		o := occ("a", 1, "ns")
		w, err := syslog.Dial(network, l.Addr().String(), syslog.LOG_LOCAL0, "k8s.event")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		theirs := acceptLine(t, l, func() { _, _ = w.Write(o.EventJSON("")) })
		s := syslogReceiver(t, fmt.Sprintf("{network: %s, address: %q, tag: k8s.event}", network, l.Addr()))
		ours := acceptLine(t, l, func() { _, _ = s.Write(t.Context(), []*Occurrence{o}) })
		if strip := func(s string) string { return syslogTimestamp.ReplaceAllString(s, "$1TIME ") }; strip(ours) != strip(theirs) {
			t.Errorf("%s:\nours   %q\ntheirs %q", network, ours, theirs)
		}
	}
}

// acceptLine runs send, accepts its connection on l and returns the first
// line received, newline included.
func acceptLine(t *testing.T, l net.Listener, send func()) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		got <- line
	}()
	send()
	return <-got
}

// A daemon restarted between two writes closes the sink's connection: the
// second write finds it closed and reconnects, so its message is stored.
// Written into the closed connection, it would have been lost: the kernel
// takes a write on a connection whose peer has closed it.
func TestSyslogReconnectsToARestartedDaemonSoNoMessageIsLost(t *testing.T) {
	srv := rsyslogtest.Start(t)
	s := syslogReceiver(t, fmt.Sprintf("{network: tcp, address: %q}", srv.TCPAddr()))
	if n, err := s.Write(t.Context(), []*Occurrence{occ("before", 1, "ns")}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	waitSyslog(t, srv, 1)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Write(t.Context(), []*Occurrence{occ("after", 1, "ns")}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if ms := waitSyslog(t, srv, 2); !strings.Contains(ms[1].Text, `"uid":"after"`) {
		t.Errorf("second message %+v", ms[1])
	}
}

// Writers on several goroutines share the connection: every message
// arrives whole.
func TestSyslogConcurrentWritesArriveWhole(t *testing.T) {
	srv := rsyslogtest.Start(t)
	s := syslogReceiver(t, fmt.Sprintf("{network: tcp, address: %q}", srv.TCPAddr()))
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				o := occ(fmt.Sprintf("w%d-%d", w, i), 1, "ns")
				if n, err := s.Write(context.Background(), []*Occurrence{o, occ(o.UID, 2, "ns")}); n != 2 || err != nil {
					t.Error(n, err)
				}
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, m := range waitSyslog(t, srv, writers*each*2) {
		var rec struct{ Metadata struct{ UID string } }
		if err := json.Unmarshal([]byte(m.Text), &rec); err != nil {
			t.Fatalf("message %q: %v", m.Text, err)
		}
		seen[rec.Metadata.UID] = true
	}
	if len(seen) != writers*each {
		t.Errorf("%d events seen, want %d", len(seen), writers*each)
	}
}

// A message larger than a datagram can hold is dropped as permanent, after
// the messages before it are sent; the daemon stores those.
func TestSyslogDatagramTooLargeIsPermanentAfterTheSentPrefix(t *testing.T) {
	srv := rsyslogtest.Start(t)
	s := syslogReceiver(t, fmt.Sprintf("{network: udp, address: %q}", srv.UDPAddr()))
	huge := occ("huge", 1, "ns")
	huge.Message = strings.Repeat("x", 70<<10)
	n, err := s.Write(t.Context(), []*Occurrence{occ("small", 1, "ns"), huge, occ("after", 1, "ns")})
	if n != 1 || !IsPermanent(err) || !strings.Contains(err.Error(), "huge/1") {
		t.Fatalf("n %d, err %v; want 1 sent and a permanent error about huge/1", n, err)
	}
	if ms := waitSyslog(t, srv, 1); !strings.Contains(ms[0].Text, `"uid":"small"`) {
		t.Errorf("stored %+v", ms[0])
	}
}

func TestSyslogUnreachableDaemonIsRetryable(t *testing.T) {
	s := syslogReceiver(t, fmt.Sprintf("{network: tcp, address: %q, timeout: 2s}", deadAddr()))
	n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
	wantFailure(t, "unreachable", n, err, false)
}

// A write blocked on a daemon that does not read returns once its context
// ends, with what it sent.
func TestSyslogWriteReturnsWhenItsContextEnds(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c // never read
	}()
	s := syslogReceiver(t, fmt.Sprintf("{network: tcp, address: %q, timeout: 1h}", l.Addr()))
	var batch []*Occurrence
	for i := range 64 { // 64 MiB: more than the socket buffers hold
		o := occ(fmt.Sprint("big", i), 1, "ns")
		o.Message = strings.Repeat("x", 1<<20)
		batch = append(batch, o)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		n, err := s.Write(ctx, batch)
		if n == len(batch) {
			err = fmt.Errorf("all %d sent: %v", n, err)
		}
		done <- err
	}()
	c := <-accepted
	defer c.Close()
	cancel()
	if err := <-done; err == nil || IsPermanent(err) {
		t.Errorf("err %v, want a retryable error", err)
	}
}

func TestSyslogTheirExampleLoadsAndBadKeysAreNamed(t *testing.T) {
	c, err := LoadConfig(theirs + "19-syslog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Receivers[0].Syslog; s == nil || s.Network != "tcp" || s.Address != "127.0.0.1:11514" || s.Tag != "k8s.event" ||
		s.priority() != 16*8 || len(otherWarnings(c.Warnings)) != 0 {
		t.Errorf("syslog %+v, warnings %q", s, c.Warnings)
	}
	if p := (&SyslogConfig{Facility: "local3", Severity: "info"}).priority(); p != 19*8+6 {
		t.Errorf("local3.info is %d, want %d", p, 19*8+6)
	}
	wantConfigErrors(t, map[string]string{
		"syslog: {network: sctp, address: a:1}":             `syslog.network "sctp" is unknown`,
		"syslog: {network: tcp}":                            "syslog.address is required",
		"syslog: {address: a:1}":                            "syslog.address is set without a network",
		"syslog: {network: udp, address: nohost}":           `syslog.address "nohost" is not host:port`,
		"syslog: {network: udp, address: a:1, facility: x}": `syslog.facility "x" is unknown`,
		"syslog: {network: udp, address: a:1, severity: x}": `syslog.severity "x" is unknown`,
	})
}
