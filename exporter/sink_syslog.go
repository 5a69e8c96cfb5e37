package exporter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// SyslogConfig configures a syslog receiver (kubernetes-event-exporter's
// keys network, address and tag; facility, severity, timeout and the
// record's layout are this exporter's): each occurrence is one syslog
// message whose text is its record, framed as Go's log/syslog frames it,
// which kubernetes-event-exporter uses.
type SyslogConfig struct {
	// Network is tcp, udp (or tcp4, tcp6, udp4, udp6), unix or unixgram;
	// empty sends to the local daemon, as Go's log/syslog does: /dev/log,
	// /var/run/syslog or /var/run/log, datagram or stream.
	Network string `yaml:"network"`
	// Address is the daemon's host:port, or its socket's path for unix
	// and unixgram.
	Address string `yaml:"address"`
	// Tag is the message's tag (default: the program's name, os.Args[0],
	// as Go's log/syslog).
	Tag string `yaml:"tag"`
	// Facility is the messages' facility, a name as syslog.conf writes
	// it (default local0, as kubernetes-event-exporter).
	Facility string `yaml:"facility"`
	// Severity is the messages' severity, a name as syslog.conf writes it
	// (default emerg: kubernetes-event-exporter dials with LOG_LOCAL0
	// alone, whose severity bits are those of emerg; a daemon's usual
	// rules broadcast emerg messages to every logged-in user, so info is
	// the likely choice of a new configuration).
	Severity string `yaml:"severity"`
	// Timeout bounds connecting and each write (default 10 s).
	Timeout Duration `yaml:"timeout"`
	// Payload is the layout and deDot of the message texts.
	Payload `yaml:",inline"`
	// Encode makes each message text; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`
}

// syslogFacilities and syslogSeverities are the names of syslog.conf, by
// their codes.
var (
	syslogFacilities = []string{"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
		"authpriv", "ftp", "ntp", "security", "console", "solaris-cron",
		"local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"}
	syslogSeverities = []string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}
)

// syslogNetworks are the networks a syslog receiver sends on ("" is the
// local daemon).
var syslogNetworks = []string{"", "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6", "unix", "unixgram"}

func (c *SyslogConfig) validate() []string {
	var p []string
	if !slices.Contains(syslogNetworks, c.Network) {
		p = append(p, fmt.Sprintf("syslog.network %q is unknown (want tcp, udp, unix, unixgram or none for the local daemon)", c.Network))
	}
	switch {
	case c.Network == "" && c.Address != "":
		p = append(p, "syslog.address is set without a network: set network (tcp, udp, unix or unixgram) too")
	case c.Network != "" && c.Address == "":
		p = append(p, "syslog.address is required with a network")
	case !c.unixNetwork() && c.Address != "":
		if _, _, err := net.SplitHostPort(c.Address); err != nil {
			p = append(p, fmt.Sprintf("syslog.address %q is not host:port", c.Address))
		}
	}
	if c.Facility != "" && !slices.Contains(syslogFacilities, c.Facility) {
		p = append(p, fmt.Sprintf("syslog.facility %q is unknown (want one of kern, user, ..., local0 to local7)", c.Facility))
	}
	if c.Severity != "" && !slices.Contains(syslogSeverities, c.Severity) {
		p = append(p, fmt.Sprintf("syslog.severity %q is unknown (want emerg, alert, crit, err, warning, notice, info or debug)", c.Severity))
	}
	return append(p, connectionProblems("syslog", &c.Timeout, nil)...)
}

// unixNetwork reports whether the receiver sends on a Unix socket, whose
// messages have the local form (no host name, a short timestamp).
func (c *SyslogConfig) unixNetwork() bool {
	return c.Network == "" || c.Network == "unix" || c.Network == "unixgram"
}

// priority returns the messages' PRI.
func (c *SyslogConfig) priority() int {
	f, s := slices.Index(syslogFacilities, c.Facility), slices.Index(syslogSeverities, c.Severity)
	if c.Facility == "" {
		f = slices.Index(syslogFacilities, "local0")
	}
	return f*8 + max(s, 0)
}

// SyslogSink sends occurrences to a syslog daemon, one message each, in
// the format of Go's log/syslog, kubernetes-event-exporter's: over a
// network "<PRI>RFC3339-time host tag[pid]: record", on a Unix socket
// "<PRI>Stamp-time tag[pid]: record", each ended by a newline (the
// framing of syslog over a stream, RFC 6587's non-transparent framing; a
// record, JSON, holds no newline).
//
// Syslog has no acknowledgements: a message is stored once the kernel took
// it. Before writing on a stream connection the sink checks that the
// daemon has not closed it (a restarted daemon), and reconnects if so,
// rather than writing into a connection that would lose the messages. A
// failed write or connection is retried, from the first message not
// written; a message too long for a datagram is [Permanent]. Write is safe
// for concurrent use: the connection is used by one write at a time.
type SyslogSink struct {
	cfg    SyslogConfig
	header syslogHeader

	mu   sync.Mutex // guards what follows
	conn net.Conn
	buf  []byte
	ends []int // ends[i] is the end of message i in buf
}

// NewSyslogSink returns a syslog sink; it connects at the first write.
func NewSyslogSink(cfg SyslogConfig) (*SyslogSink, error) {
	if p := cfg.validate(); len(p) > 0 {
		return nil, errors.New(p[0])
	}
	tag := cfg.Tag
	if tag == "" {
		tag = os.Args[0]
	}
	host, _ := os.Hostname()
	return &SyslogSink{cfg: cfg, header: syslogHeader{pri: cfg.priority(), tag: tag, pid: os.Getpid(), host: host,
		local: cfg.unixNetwork()}}, nil
}

// syslogHeader makes the start of a message, as Go's log/syslog does.
type syslogHeader struct {
	pri   int
	tag   string
	pid   int
	host  string // "" is the connection's local address
	local bool
}

// appendTo appends the header of a message sent at now on conn.
func (h syslogHeader) appendTo(b []byte, now time.Time, conn net.Conn) []byte {
	b = append(b, '<')
	b = strconv.AppendInt(b, int64(h.pri), 10)
	b = append(b, '>')
	if h.local {
		b = now.AppendFormat(b, time.Stamp)
	} else {
		b = now.AppendFormat(b, time.RFC3339)
		b = append(b, ' ')
		if h.host != "" {
			b = append(b, h.host...)
		} else {
			b = append(b, conn.LocalAddr().String()...)
		}
	}
	b = append(b, ' ')
	b = append(b, h.tag...)
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(h.pid), 10)
	return append(b, "]: "...)
}

// Write sends the batch, in order; an occurrence that cannot be encoded
// ends the batch there (the ones before are sent).
func (s *SyslogSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.connect(ctx); err != nil {
		return 0, fmt.Errorf("syslog %s %s: %w", s.cfg.Network, s.cfg.Address, err)
	}
	n, encErr := s.encode(batch)
	sent, err := s.send(ctx)
	if err != nil {
		s.disconnect()
		err = fmt.Errorf("syslog %s %s: occurrence %s: %w", s.cfg.Network, s.cfg.Address, batch[sent].Key(), err)
		if errors.Is(err, syscall.EMSGSIZE) {
			err = Permanent(err)
		}
		return sent, err
	}
	return n, encErr
}

// encode writes the messages of the longest prefix of batch that encodes
// into s.buf, and returns its length.
func (s *SyslogSink) encode(batch []*Occurrence) (int, error) {
	s.buf, s.ends = s.buf[:0], s.ends[:0]
	now := time.Now()
	return encodeEach(batch, s.cfg.Encode, func(_ int, _ *Occurrence, rec []byte) {
		s.buf = s.header.appendTo(s.buf, now, s.conn)
		s.buf = append(append(s.buf, rec...), '\n')
		s.ends = append(s.ends, len(s.buf))
	})
}

// send writes the messages of s.buf: on a stream in one write, as
// datagrams one each. It returns how many were written, and the error
// that stopped it. ctx's end, its deadline and the timeout interrupt it.
func (s *SyslogSink) send(ctx context.Context) (int, error) {
	deadline := time.Now().Add(time.Duration(s.cfg.Timeout))
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := s.conn.SetWriteDeadline(deadline); err != nil {
		return 0, err
	}
	stop := context.AfterFunc(ctx, func() { _ = s.conn.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	if !datagram(s.conn) {
		written, err := s.conn.Write(s.buf)
		return countEnded(s.ends, written), err
	}
	start := 0
	for i, end := range s.ends {
		if _, err := s.conn.Write(s.buf[start:end]); err != nil {
			return i, err
		}
		start = end
	}
	return len(s.ends), nil
}

// countEnded returns how many messages, whose ends are ends, lie within
// the first written bytes.
func countEnded(ends []int, written int) int {
	n, _ := slices.BinarySearch(ends, written+1)
	return n
}

// connect dials the daemon unless connected on a stream the daemon has
// not closed.
func (s *SyslogSink) connect(ctx context.Context) error {
	if s.conn != nil && !peerClosed(s.conn) {
		return nil
	}
	s.disconnect()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.Timeout))
	defer cancel()
	var d net.Dialer
	if s.cfg.Network != "" {
		c, err := d.DialContext(ctx, s.cfg.Network, s.cfg.Address)
		s.conn = c
		return err
	}
	var err error
	for _, network := range []string{"unixgram", "unix"} {
		for _, path := range []string{"/dev/log", "/var/run/syslog", "/var/run/log"} {
			var c net.Conn
			if c, err = d.DialContext(ctx, network, path); err == nil {
				s.conn = c
				return nil
			}
		}
	}
	return fmt.Errorf("no local syslog daemon (/dev/log, /var/run/syslog, /var/run/log): %w", err)
}

// datagram reports whether c sends datagrams (udp, unixgram): one
// message each.
func datagram(c net.Conn) bool {
	switch c.LocalAddr().Network() {
	case "udp", "udp4", "udp6", "unixgram":
		return true
	}
	return false
}

// disconnect closes the connection, if any.
func (s *SyslogSink) disconnect() {
	if s.conn != nil {
		_ = s.conn.Close()
		s.conn = nil
	}
}

// Close closes the connection.
func (s *SyslogSink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disconnect()
	return nil
}
