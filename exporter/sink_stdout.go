package exporter

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// StdoutConfig configures a stdout receiver: JSON Lines on the standard
// output.
type StdoutConfig struct {
	// Payload is the layout and deDot of the records.
	Payload `yaml:",inline"`
}

// WriterSink writes occurrences as JSON Lines to an io.Writer (the stdout
// receiver writes to os.Stdout).
type WriterSink struct {
	// W is written to, one call per batch.
	W io.Writer
	// Encode makes each line; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder
	buf    []byte
}

func newStdoutSink(_ *StdoutConfig, enc Encoder) Sink { return &WriterSink{W: os.Stdout, Encode: enc} }

// Write writes the batch in one call of the writer, holding the lock of
// stream writes (see writeStream); an occurrence that cannot be encoded
// ends the batch there (the ones before are written).
func (s *WriterSink) Write(_ context.Context, batch []*Occurrence) (int, error) {
	buf, n, encErr := appendLines(s.buf[:0], batch, s.Encode.orDefault())
	s.buf = buf
	if len(buf) > 0 {
		if _, err := writeStream(s.W, buf); err != nil {
			return 0, err
		}
	}
	return n, encErr
}

// streamWrites serializes the writes of the sinks that write streams:
// standard output, a pipe, a device. Two receivers writing /dev/stdout (a
// file and a stdout receiver, say) hold two descriptors of one pipe, and
// the kernel splits a write larger than the pipe's buffer: without it,
// their lines would interleave and tear.
var streamWrites sync.Mutex

// writeStream writes b to w in one call, with no other stream write of
// this process in between.
func writeStream(w io.Writer, b []byte) (int, error) {
	streamWrites.Lock()
	defer streamWrites.Unlock()
	return w.Write(b)
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

// PipeConfig configures a pipe receiver, kubernetes-event-exporter's: JSON
// Lines written to Path, opened for writing (created, and truncated if it
// is a regular file) when the exporter starts: a named pipe, or a device
// such as /dev/stdout.
type PipeConfig struct {
	// Path is opened for writing.
	Path string `yaml:"path"`
	// Payload is the layout and deDot of the records.
	Payload `yaml:",inline"`
}

func (c *PipeConfig) validate() []string {
	if c.Path == "" {
		return []string{"pipe.path is required"}
	}
	return nil
}

// pipeSink is a [WriterSink] that owns the file it writes.
type pipeSink struct {
	WriterSink
	f *os.File
}

func newPipeSink(c *PipeConfig, enc Encoder) (Sink, error) {
	f, err := os.OpenFile(c.Path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	return &pipeSink{WriterSink: WriterSink{W: f, Encode: enc}, f: f}, nil
}

// Close closes the file.
func (s *pipeSink) Close(context.Context) error { return s.f.Close() }
