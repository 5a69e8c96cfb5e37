package rsyslogtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter/internal/proctest"
)

// ReadyTimeout bounds how long a start may take until every input accepts.
const ReadyTimeout = 30 * time.Second

// startAttempts is how often a first start is tried with fresh ports when
// a port picked as free was taken by someone else in the meantime.
const startAttempts = 3

// Message is one message as rsyslogd parsed and stored it.
type Message struct {
	// Priority is the PRI: facility*8 + severity.
	Priority int
	// Timestamp is the message's timestamp as rsyslogd read it (RFC 3339),
	// Hostname its host name (rsyslogd's own host for a local message,
	// which has none).
	Timestamp, Hostname string
	// Tag is the syslog tag with the process ID and colon ("tag[42]:").
	Tag string
	// Input is the input module that received it: imtcp (TCP), imudp
	// (UDP), imuxsock (Unix datagrams) or imptcp (Unix stream).
	Input string
	// Text is the message text, without the space after the tag.
	Text string
}

// Server is an rsyslogd on loopback that stores every message it receives
// in a file of a test's temporary directory. It listens on TCP and UDP on
// the same port of 127.0.0.1, and on a Unix datagram and a Unix stream
// socket. Create one with [Start]; its methods are safe for concurrent use.
type Server struct {
	bin      string
	dir      string // config, output and the daemon's work files
	sockDir  string // the Unix sockets (short path: at most 108 bytes)
	port     int
	outPath  string
	confPath string

	mu      sync.Mutex
	proc    *proctest.Process // nil while stopped
	stopped bool
}

// Start installs the daemon if needed (see [Binary]), starts it on a free
// loopback port with its files in t.TempDir, and waits until it accepts
// connections, failing t if any of that fails. A cleanup registered with
// t stops it and, when t has failed, logs the end of its output.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "rsyslog")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &Server{bin: bin, dir: dir, sockDir: sockDir, outPath: filepath.Join(dir, "messages.log"),
		confPath: filepath.Join(dir, "rsyslog.conf")}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last output of rsyslogd (%s):\n%s", s.logPath(), s.logTail(40))
		}
		s.stop()
		_ = os.RemoveAll(sockDir)
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		if s.port, err = freePort(); err != nil {
			t.Fatal(err)
		}
		if err = s.start(); err == nil {
			return s
		}
		if attempt == startAttempts {
			t.Fatal(err)
		}
	}
}

// TCPAddr returns the TCP input's address, 127.0.0.1:PORT.
func (s *Server) TCPAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// UDPAddr returns the UDP input's address: the TCP input's port, on UDP.
func (s *Server) UDPAddr() string { return s.TCPAddr() }

// UnixgramPath returns the Unix datagram socket's path (imuxsock, as
// /dev/log is).
func (s *Server) UnixgramPath() string { return filepath.Join(s.sockDir, "dgram.sock") }

// UnixPath returns the Unix stream socket's path (imptcp).
func (s *Server) UnixPath() string { return filepath.Join(s.sockDir, "stream.sock") }

// Messages returns the messages stored so far, in the order stored.
func (s *Server) Messages() ([]Message, error) {
	f, err := os.Open(s.outPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Message
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m, err := parseLine(sc.Text())
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// WaitMessages waits until at least n messages are stored, and returns
// them; it fails when ctx ends first, returning those stored.
func (s *Server) WaitMessages(ctx context.Context, n int) ([]Message, error) {
	for {
		ms, err := s.Messages()
		if err != nil || len(ms) >= n {
			return ms, err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ms, fmt.Errorf("rsyslogtest: %d messages stored, want %d: %w", len(ms), n, ctx.Err())
		}
	}
}

// parseLine parses a line of the output file (see the template of
// config).
func parseLine(line string) (Message, error) {
	f := strings.SplitN(line, "|", 6)
	if len(f) != 6 {
		return Message{}, fmt.Errorf("rsyslogtest: output line %q has %d fields, want 6", line, len(f))
	}
	pri, err := strconv.Atoi(f[0])
	if err != nil {
		return Message{}, fmt.Errorf("rsyslogtest: output line %q: priority: %w", line, err)
	}
	return Message{Priority: pri, Timestamp: f[1], Hostname: f[2], Tag: f[3], Input: f[4],
		Text: strings.TrimPrefix(f[5], " ")}, nil
}

// Restart stops the daemon (SIGTERM: what it received is written) and
// starts it again on the same port and sockets, as an operator restarting
// it does. Connections to it are closed by the stop.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("rsyslogtest: server is stopped")
	}
	s.terminate()
	return s.start()
}

// stop stops the daemon for good: Restart fails afterwards.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.terminate()
}

// terminate stops the process, if any, with SIGTERM (SIGKILL after 10 s),
// and waits for its exit; s.mu is held.
func (s *Server) terminate() {
	if s.proc == nil {
		return
	}
	_ = s.proc.Signal(syscall.SIGTERM)
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-s.proc.Done():
	case <-t.C:
		s.proc.Kill()
	}
	s.proc = nil
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "rsyslogd.log") }

// config returns the daemon's configuration: every input on loopback or in
// sockDir, every message stored by the template "fields" (PRI, reported
// time, host, tag, input, text, separated by |).
func (s *Server) config() string {
	return fmt.Sprintf(`global(workDirectory=%[1]q maxMessageSize="256k")
module(load="imtcp")
module(load="imudp")
module(load="imptcp")
module(load="imuxsock" SysSock.Use="off")
input(type="imtcp" address="127.0.0.1" port="%[2]d")
input(type="imudp" address="127.0.0.1" port="%[2]d")
input(type="imptcp" path=%[3]q unlink="on")
input(type="imuxsock" Socket=%[4]q)
template(name="fields" type="string" string="%%pri%%|%%timereported:::date-rfc3339%%|%%hostname%%|%%syslogtag%%|%%inputname%%|%%msg%%\n")
*.* action(type="omfile" file=%[5]q template="fields")
`, s.dir, s.port, s.UnixPath(), s.UnixgramPath(), s.outPath)
}

// start writes the configuration, starts the process and waits until it
// is ready; s.mu is held.
func (s *Server) start() error {
	if err := os.WriteFile(s.confPath, []byte(s.config()), 0o644); err != nil {
		return err
	}
	args := []string{"-n", "-f", s.confPath, "-i", filepath.Join(s.dir, "rsyslogd.pid")}
	p, err := proctest.Start(s.bin, args, s.dir, s.logPath())
	if err != nil {
		return err
	}
	if err := s.waitReady(p); err != nil {
		p.Kill()
		return err
	}
	s.proc = p
	return nil
}

// waitReady waits until the TCP and Unix stream inputs accept connections
// and the datagram socket exists (rsyslogd binds every input before it
// starts any), p exits or ReadyTimeout passes.
func (s *Server) waitReady(p *proctest.Process) error {
	deadline := time.Now().Add(ReadyTimeout)
	for {
		err := s.probe()
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("rsyslogtest: rsyslogd exited: %v; last output (%s):\n%s", p.Err(), s.logPath(), s.logTail(40))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rsyslogtest: rsyslogd not ready after %v (%v); last output (%s):\n%s",
				ReadyTimeout, err, s.logPath(), s.logTail(40))
		}
	}
}

// probe returns nil when the inputs are ready.
func (s *Server) probe() error {
	for _, a := range [][2]string{{"tcp", s.TCPAddr()}, {"unix", s.UnixPath()}} {
		c, err := net.DialTimeout(a[0], a[1], time.Second)
		if err != nil {
			return err
		}
		c.Close()
	}
	_, err := os.Stat(s.UnixgramPath())
	return err
}

// logTail returns the last n lines of the daemon's output (every run's).
func (s *Server) logTail(n int) string {
	b, err := os.ReadFile(s.logPath())
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", s.logPath(), err)
	}
	return proctest.Tail(b, n)
}

// freePort returns a loopback port that was free on TCP and UDP a moment
// ago.
func freePort() (int, error) {
	for range 10 {
		port, err := proctest.FreePort()
		if err != nil {
			return 0, err
		}
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, errors.New("rsyslogtest: no port free on both TCP and UDP")
}
