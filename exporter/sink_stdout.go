package exporter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
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
// receiver writes to os.Stdout). Its writes are safe for concurrent use
// (several writers of a receiver, [Receiver].Writers): they call W one at
// a time.
type WriterSink struct {
	// W is written to, one call per batch.
	W io.Writer
	// Encode makes each line; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder

	mu      sync.Mutex  // guards what follows, and W's writes
	buf     []byte      // the lines of the write in progress
	lock    *sync.Mutex // W's stream lock, or nil (see streamLock)
	checked bool        // lock was looked up
	lines   lineWriter
}

// newStdoutSink writes to the standard output: os.Stdout, or, when that
// is a regular file (a shell's "> file"), a descriptor of its own opened
// for appending, so that what other receivers append to /dev/stdout is
// not overwritten from os.Stdout's offset.
func newStdoutSink(_ *StdoutConfig, enc Encoder) Sink { return stdoutSinkOn(os.Stdout, enc) }

func stdoutSinkOn(stdout *os.File, enc Encoder) Sink {
	if fi, err := stdout.Stat(); err == nil && fi.Mode().IsRegular() {
		path := fmt.Sprintf("/proc/self/fd/%d", stdout.Fd())
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0); err == nil {
			return &pipeSink{WriterSink: WriterSink{W: f, Encode: enc}, f: f}
		}
	}
	return &WriterSink{W: stdout, Encode: enc}
}

// Write writes the batch in one call of the writer, holding the lock of
// the stream it writes if it is one (see streamLock); an occurrence that
// cannot be encoded ends the batch there (the ones before are written).
func (s *WriterSink) Write(_ context.Context, batch []*Occurrence) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf, n, encErr := appendLines(s.buf[:0], batch, s.Encode.orDefault())
	s.buf = buf
	if len(buf) > 0 {
		if !s.checked {
			s.lock, s.checked = streamLock(s.W), true
		}
		if whole, err := s.lines.write(s.lock, s.W, buf); err != nil {
			return whole, err
		}
	}
	return n, encErr
}

// Close does nothing: the writer belongs to the caller.
func (s *WriterSink) Close(context.Context) error { return nil }

// streamLocks holds a lock per stream (a pipe, a terminal, a device) that
// a sink of this process writes. Two receivers writing /dev/stdout (a
// stdout and a file receiver, say) hold two descriptors of one pipe, and
// the kernel splits a write larger than the pipe's buffer: each sink
// writes a batch holding the stream's lock, so that their lines never
// interleave and tear. A stalled stream holds back only the sinks that
// write it.
var streamLocks struct {
	mu    sync.Mutex
	files []streamFile
}

type streamFile struct {
	fi os.FileInfo
	mu *sync.Mutex
}

// streamLock returns the lock of the stream w writes, or nil when w is not
// an *os.File or is a regular file: a regular file opened for appending
// takes each write whole, and a writer of the caller's is the caller's.
func streamLock(w io.Writer) *sync.Mutex {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode().IsRegular() {
		return nil
	}
	streamLocks.mu.Lock()
	defer streamLocks.mu.Unlock()
	for _, sf := range streamLocks.files {
		if os.SameFile(sf.fi, fi) {
			return sf.mu
		}
	}
	mu := new(sync.Mutex)
	streamLocks.files = append(streamLocks.files, streamFile{fi, mu})
	return mu
}

// lineWriter writes lines to a stream that cannot be cut back, keeping
// what a failed write tore: the rest of a line written in part (a write
// that stopped short: a full disk under a redirected standard output, a
// reader gone), which it writes before the next lines, so that the stream
// holds whole lines only. Its owner serializes calls.
type lineWriter struct{ tail []byte }

// write writes the tail of a line an earlier write tore, then b (whole
// lines), in one call of w holding mu if it is not nil, and returns how
// many of b's lines are written whole: all of them, or, when the write
// stops short, those before the point where it stopped; the rest of a line
// it stopped in becomes the tail. A retry of the lines not counted writes
// that line again, whole: a duplicate, where writing it again at once
// would leave a torn line followed by a whole one.
func (lw *lineWriter) write(mu *sync.Mutex, w io.Writer, b []byte) (int, error) {
	out := b
	if len(lw.tail) > 0 {
		out = append(slices.Clip(lw.tail), b...)
	}
	n, err := writeLocked(mu, w, out)
	if err == nil && n == len(out) {
		lw.tail = nil
		return bytes.Count(b, newline), nil
	}
	if err == nil {
		err = io.ErrShortWrite
	}
	n = max(n, 0)
	if t := len(lw.tail); n < t {
		lw.tail = slices.Clone(lw.tail[n:])
		return 0, err
	}
	done := b[:n-len(lw.tail)]
	whole := bytes.Count(done, newline)
	lw.tail = nil
	if end := bytes.LastIndexByte(done, '\n') + 1; end < len(done) {
		rest := b[len(done):]
		lw.tail = slices.Clone(rest[:bytes.IndexByte(rest, '\n')+1])
	}
	return whole, err
}

var newline = []byte{'\n'}

// writeLocked writes b to w in one call, holding mu if it is not nil.
func writeLocked(mu *sync.Mutex, w io.Writer, b []byte) (int, error) {
	if mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	return w.Write(b)
}

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
// Lines written to Path, opened for writing when the exporter starts: a
// named pipe, or a device such as /dev/stdout, which is appended to; a
// path of a regular file is created, or truncated, as there.
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
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if isStream(c.Path) { // /dev/stdout may be a shell's "> file": append to it
		flags = os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(c.Path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	return &pipeSink{WriterSink: WriterSink{W: f, Encode: enc}, f: f}, nil
}

// Close closes the file.
func (s *pipeSink) Close(context.Context) error { return s.f.Close() }
