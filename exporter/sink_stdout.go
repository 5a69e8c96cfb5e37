package exporter

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
)

// StdoutConfig configures a stdout receiver: JSON Lines on the standard
// output. It has no settings.
type StdoutConfig struct{}

// WriterSink writes occurrences as JSON Lines to an io.Writer (the stdout
// receiver writes to os.Stdout).
type WriterSink struct {
	// W is written to, one call per batch.
	W   io.Writer
	buf []byte
}

func newStdoutSink(*StdoutConfig) Sink { return &WriterSink{W: os.Stdout} }

// Write writes the batch in one call of the writer.
func (s *WriterSink) Write(_ context.Context, batch []*Occurrence) (int, error) {
	s.buf = s.buf[:0]
	for _, o := range batch {
		s.buf = append(s.buf, o.JSON()...)
		s.buf = append(s.buf, '\n')
	}
	if _, err := s.W.Write(s.buf); err != nil {
		return 0, err
	}
	return len(batch), nil
}

// Close does nothing: the writer belongs to the caller.
func (s *WriterSink) Close(context.Context) error { return nil }

// LogConfig configures a log receiver: every occurrence becomes one slog
// record on the standard error, at level Warn for Warning events and Info
// otherwise.
type LogConfig struct {
	// Format is text (the default) or json.
	Format string `yaml:"format"`
}

func (c *LogConfig) validate() []string {
	if c.Format != "" && c.Format != "text" && c.Format != "json" {
		return []string{"log.format " + c.Format + " is unknown (want text or json)"}
	}
	return nil
}

// LogSink logs occurrences to a [slog.Logger].
type LogSink struct {
	// L is the logger.
	L *slog.Logger
}

func newLogSink(c *LogConfig) Sink {
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if c.Format == "json" {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	return &LogSink{L: slog.New(h)}
}

// Write logs each occurrence.
func (s *LogSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	for _, o := range batch {
		level := slog.LevelInfo
		if strings.EqualFold(o.Type, "Warning") {
			level = slog.LevelWarn
		}
		s.L.LogAttrs(ctx, level, o.Message, slog.String("uid", o.UID), slog.Int("count", int(o.Count)),
			slog.String("namespace", o.Namespace), slog.String("reason", o.Reason), slog.String("type", o.Type),
			slog.String("kind", o.Regarding.Kind), slog.String("object", o.Regarding.Name),
			slog.String("component", o.ReportingController))
	}
	return len(batch), nil
}

// Close does nothing.
func (s *LogSink) Close(context.Context) error { return nil }
