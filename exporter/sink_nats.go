package exporter

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"
	"time"

	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSConfig configures a NATS receiver: every occurrence is published to a
// JetStream stream through the NATS module ([fanoutnats.Sink]), with the
// message ID [Occurrence.Key], so that the stream stores an occurrence
// once even when a retry or a restart publishes it again (within the
// stream's duplicates window, 2 minutes by default).
type NATSConfig struct {
	// URL is the server URL (nats://host:4222, or several separated by
	// commas).
	URL string `yaml:"url"`
	// Subject is the subject published to; a stream must capture it.
	Subject string `yaml:"subject"`
	// CredentialsFile, if set, is a NATS credentials file.
	CredentialsFile string `yaml:"credentialsFile"`
	// Timeout bounds each publish (default 5 s).
	Timeout Duration `yaml:"timeout"`
	// Payload is the layout and deDot of the records.
	Payload `yaml:",inline"`
	// Encode makes each message; nil publishes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`

	// connect, if set (by tests), is used instead of dialling URL.
	connect func() (*nats.Conn, error)
}

func (c *NATSConfig) validate() []string {
	var p []string
	switch {
	case c.URL == "" && c.connect == nil:
		p = append(p, "nats.url is required")
	case c.connect == nil:
		p = appendProblem(p, natsURLProblem(c.URL))
	}
	switch {
	case c.Subject == "":
		p = append(p, "nats.subject is required")
	case !fanoutnats.ValidSubject(c.Subject):
		p = append(p, fmt.Sprintf("nats.subject %q is not a subject to publish to "+
			"(tokens separated by dots, without spaces or the wildcards * and >)", c.Subject))
	}
	if c.Timeout == 0 {
		c.Timeout = Duration(fanoutnats.DefaultTimeout)
	}
	return p
}

// natsURLProblem returns why url, a comma-separated list of servers, is
// one nats.Connect refuses, or "": as nats.go reads it, each server is a
// URL (nats:// when it has no scheme), and websocket servers (ws, wss)
// cannot be mixed with the others.
func natsURLProblem(url string) string {
	var servers, ws int
	for s := range strings.SplitSeq(url, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		u, err := neturl.Parse(s)
		if err != nil || u.Host == "" {
			return fmt.Sprintf("nats.url %q: %q is not a server URL", url, s)
		}
		servers++
		if u.Scheme == "ws" || u.Scheme == "wss" {
			ws++
		}
	}
	switch {
	case servers == 0:
		return fmt.Sprintf("nats.url %q names no server", url)
	case ws != 0 && ws != servers:
		return fmt.Sprintf("nats.url %q mixes websocket and other servers", url)
	}
	return ""
}

// NATSSink publishes occurrences to JetStream. It connects at once but does
// not wait for the server: while it is unreachable, writes fail and are
// retried by the receiver's policy.
type NATSSink struct {
	nc   *nats.Conn
	sink *fanoutnats.Sink[*Occurrence]
}

// NewNATSSink connects to the server (retrying in the background if it is
// not reachable yet) and returns the sink.
func NewNATSSink(cfg NATSConfig) (*NATSSink, error) {
	if p := cfg.validate(); len(p) > 0 {
		return nil, errors.New(p[0])
	}
	nc, err := cfg.dial()
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: %w", err)
	}
	s, err := fanoutnats.NewSink(js, fanoutnats.SinkConfig[*Occurrence]{
		Subject: cfg.Subject,
		Codec:   fanoutnats.Codec[*Occurrence]{Encode: cfg.Encode.orDefault()},
		MsgID:   (*Occurrence).Key,
		Timeout: time.Duration(cfg.Timeout),
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: %w", err)
	}
	return &NATSSink{nc: nc, sink: s}, nil
}

func (c *NATSConfig) dial() (*nats.Conn, error) {
	if c.connect != nil {
		return c.connect()
	}
	opts := []nats.Option{nats.Name("fanout-eventer"), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second)}
	if c.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredentialsFile))
	}
	return nats.Connect(c.URL, opts...)
}

// Write publishes the occurrences one by one, each acknowledged by the
// stream before the next. An error that retrying cannot fix (payload too
// large, permission denied) is [Permanent].
func (s *NATSSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	for i, o := range batch {
		if _, err := s.sink.Create(ctx, o); err != nil {
			if !fanoutnats.Retryable(err) {
				err = Permanent(err)
			}
			return i, err
		}
	}
	return len(batch), nil
}

// Stats returns the NATS module's counters (published, duplicates, failed).
func (s *NATSSink) Stats() fanoutnats.SinkStats { return s.sink.Stats() }

// Close closes the connection.
func (s *NATSSink) Close(context.Context) error {
	s.nc.Close()
	return nil
}
