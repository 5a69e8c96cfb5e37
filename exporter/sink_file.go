package exporter

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FileConfig configures a file receiver: JSON Lines, one occurrence per
// line, rotated by size. The names follow kubernetes-event-exporter's file
// receiver.
type FileConfig struct {
	// Path is the file written; rotated files are Path.1, Path.2, ...
	// (the higher, the newer).
	Path string `yaml:"path"`
	// MaxSize is the size in megabytes at which the file is rotated
	// (default 100); MaxBytes, if set, overrides it in bytes.
	MaxSize  int   `yaml:"maxsize"`
	MaxBytes int64 `yaml:"maxBytes"`
	// MaxBackups is how many rotated files are kept, the oldest removed
	// (0, the default: every one, as kubernetes-event-exporter's
	// lumberjack keeps them; MaxAge may still remove them).
	MaxBackups int `yaml:"maxbackups"`
	// MaxAge removes rotated files older than that many days (0 keeps
	// them).
	MaxAge int `yaml:"maxage"`
	// Payload is the layout and deDot of the records.
	Payload `yaml:",inline"`
	// Encode makes each line; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`
}

func (c *FileConfig) validate() []string {
	var p []string
	if c.Path == "" {
		p = append(p, "file.path is required")
	}
	if c.MaxSize < 0 || c.MaxBytes < 0 || c.MaxBackups < 0 || c.MaxAge < 0 {
		p = append(p, "file: maxsize, maxBytes, maxbackups and maxage must not be negative")
	}
	if c.MaxSize == 0 {
		c.MaxSize = 100
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = int64(c.MaxSize) << 20
	}
	return p
}

// FileSink writes occurrences as JSON Lines to a file, rotating it by size.
// It implements [Marker]: after a crash it reads back the lines written
// after the checkpoint, so that the exporter does not write them twice. A
// write reaches the operating system before it counts as stored (no fsync:
// a process crash loses nothing, a machine crash may).
type FileSink struct {
	cfg    FileConfig
	stream bool        // not a regular file (a pipe, /dev/stdout): append only
	lock   *sync.Mutex // the stream's lock, if it is one (see streamLock)

	// mu guards the fields below: several writers ([Receiver].Writers)
	// write at once, and Mark runs on the checkpoint's goroutine.
	mu    sync.Mutex
	buf   []byte
	f     *os.File
	gen   int   // generation of the current file: rotated to Path.<gen>
	off   int64 // size of the current file
	marks []fileMark
	// lines writes a stream, holding its lock so that other sinks writing
	// the same stream never tear its lines (see streamLock).
	lines lineWriter
}

type fileMark struct {
	seq uint64
	gen int
	off int64
}

// NewFileSink opens (or creates) the file for appending. A last line left
// incomplete by a crash is cut off.
func NewFileSink(cfg FileConfig) (*FileSink, error) {
	if p := cfg.validate(); len(p) > 0 {
		return nil, errors.New(strings.Join(p, "; "))
	}
	if isStream(cfg.Path) {
		f, err := os.OpenFile(cfg.Path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return nil, err
		}
		return &FileSink{cfg: cfg, f: f, stream: true, lock: streamLock(f)}, nil
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o755); err != nil {
		return nil, err
	}
	gens, err := backups(cfg.Path)
	if err != nil {
		return nil, err
	}
	s := &FileSink{cfg: cfg, gen: 1}
	if len(gens) > 0 {
		s.gen = gens[len(gens)-1] + 1
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	s.marks = []fileMark{{0, s.gen, s.off}}
	return s, nil
}

// isStream reports whether path is not a regular file of its own: a pipe,
// a terminal or another device, or a descriptor such as /dev/stdout
// (kubernetes-event-exporter's idiom), which a container runtime connects
// to a pipe. Such a path is written in append mode only: never truncated,
// rotated or read back after a crash.
func isStream(path string) bool {
	if strings.HasPrefix(path, "/dev/") || strings.HasPrefix(path, "/proc/self/fd/") {
		return true
	}
	fi, err := os.Stat(path)
	return err == nil && !fi.Mode().IsRegular()
}

// open opens the current file and cuts an incomplete last line.
func (s *FileSink) open() error {
	// Append mode, as kubernetes-event-exporter's lumberjack: a write goes
	// to the file's end also after another program cut it short
	// (logrotate's copytruncate), not behind a hole of zero bytes.
	f, err := os.OpenFile(s.cfg.Path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	end, err := completeLength(f)
	if err == nil {
		err = f.Truncate(end)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("file %s: %w", s.cfg.Path, err)
	}
	s.f, s.off = f, end
	return nil
}

// completeLength returns the length of f up to and including its last
// newline.
func completeLength(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := fi.Size()
	buf := make([]byte, 64<<10)
	for end > 0 {
		n := int64(len(buf))
		if n > end {
			n = end
		}
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, err
		}
		if i := strings.LastIndexByte(string(buf[:n]), '\n'); i >= 0 {
			return end - n + int64(i) + 1, nil
		}
		end -= n
	}
	return 0, nil
}

// Write appends the batch, one line per occurrence, all or nothing; an
// occurrence that cannot be encoded ends the batch there (the ones before
// are written). Writes are safe for concurrent use and go to the file one
// at a time, whole.
func (s *FileSink) Write(_ context.Context, batch []*Occurrence) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf, n, encErr := appendLines(s.buf[:0], batch, s.cfg.Encode.orDefault())
	s.buf = buf
	if n == 0 {
		return 0, encErr
	}
	batch = batch[:n]
	if !s.stream && s.off > 0 && s.off+int64(len(s.buf)) > s.cfg.MaxBytes {
		if err := s.rotate(); err != nil {
			return 0, err
		}
	}
	if s.stream {
		// A stream cannot be cut back: a torn line is finished by the
		// next write (lineWriter).
		if whole, err := s.lines.write(s.lock, s.f, s.buf); err != nil {
			return whole, err
		}
	} else if w, err := s.f.Write(s.buf); err != nil {
		// Cut what part of the batch got in, so that a retry does not
		// leave a torn line or a duplicate: the file's end less that
		// part, whatever another program did to it (see followCut).
		if fi, serr := s.f.Stat(); serr == nil {
			s.off = fi.Size() - int64(w)
			_ = s.f.Truncate(s.off)
		}
		return 0, err
	}
	s.off += int64(len(s.buf))
	if !s.stream {
		s.marks = append(s.marks, fileMark{batch[len(batch)-1].Seq, s.gen, s.off})
	}
	return len(batch), encErr
}

// followCut notices that another program cut the current file short
// (logrotate's copytruncate, a truncate -s 0) since it last looked, as Mark
// does for each checkpoint: writes went to the file's new end (append
// mode), so s.off and the marks of the current file are too far by what
// the cut removed, and move back by that much (not below 0). A mark made
// after the cut is then exact; one made before it points at or before
// what is left of its place, and Stored reads back, after a crash, lines
// the checkpoint covers anyway: what is in the file is stored, so nothing
// is skipped that was not. A look is an fstat, which cost a write of one
// line 2.5 times its time when made per write. Caller holds s.mu.
func (s *FileSink) followCut() {
	fi, err := s.f.Stat()
	if err != nil || fi.Size() >= s.off {
		return
	}
	cut := s.off - fi.Size()
	s.off = fi.Size()
	for i := range s.marks {
		if m := &s.marks[i]; m.gen == s.gen {
			m.off = max(m.off-cut, 0)
		}
	}
}

// rotate renames the current file to Path.<gen> and starts a new one.
func (s *FileSink) rotate() error {
	if err := s.f.Close(); err != nil {
		return err
	}
	if err := os.Rename(s.cfg.Path, s.cfg.Path+"."+strconv.Itoa(s.gen)); err != nil {
		return err
	}
	s.gen++
	if err := s.open(); err != nil {
		return err
	}
	return s.prune()
}

// prune removes rotated files beyond MaxBackups (if set) or older than
// MaxAge (if set).
func (s *FileSink) prune() error {
	gens, err := backups(s.cfg.Path)
	if err != nil {
		return err
	}
	for i, g := range gens {
		name := s.cfg.Path + "." + strconv.Itoa(g)
		old := false
		if s.cfg.MaxAge > 0 {
			if fi, err := os.Stat(name); err == nil {
				old = time.Since(fi.ModTime()) > time.Duration(s.cfg.MaxAge)*24*time.Hour
			}
		}
		if s.cfg.MaxBackups > 0 && i < len(gens)-s.cfg.MaxBackups || old {
			if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// backups returns the generations of the rotated files of path, ascending.
func backups(path string) ([]int, error) {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	prefix := filepath.Base(path) + "."
	var gens []int
	for _, e := range entries {
		if g, err := strconv.Atoi(strings.TrimPrefix(e.Name(), prefix)); err == nil && strings.HasPrefix(e.Name(), prefix) && g > 0 {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	return gens, nil
}

// Mark returns the position after the last write whose occurrences all
// have Seq <= seq, as "<generation>:<offset>"; "" for a stream, which
// cannot be read back.
func (s *FileSink) Mark(seq uint64) string {
	if s.stream { // set once: no lock, which a write to a stalled stream holds
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.followCut()
	i := 0
	for i+1 < len(s.marks) && s.marks[i+1].seq <= seq {
		i++
	}
	s.marks = s.marks[i:]
	m := s.marks[0]
	return strconv.Itoa(m.gen) + ":" + strconv.FormatInt(m.off, 10)
}

// Stored returns the keys of the lines written after mark, in the file the
// mark names and every file written since.
func (s *FileSink) Stored(mark string) (map[string]struct{}, error) {
	g, off, err := parseMark(mark)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	cur := s.gen
	s.mu.Unlock()
	keys := map[string]struct{}{}
	for ; g <= cur; g, off = g+1, 0 {
		name := s.cfg.Path
		if g < cur {
			name += "." + strconv.Itoa(g)
		}
		if err := readKeys(name, off, keys); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

func parseMark(mark string) (gen int, off int64, err error) {
	a, b, ok := strings.Cut(mark, ":")
	if ok {
		gen, err = strconv.Atoi(a)
		if err == nil {
			off, err = strconv.ParseInt(b, 10, 64)
		}
	}
	if !ok || err != nil || gen < 1 || off < 0 {
		return 0, 0, fmt.Errorf("file sink: invalid checkpoint mark %q", mark)
	}
	return gen, off, nil
}

// readKeys adds the key of every line of name after off; a missing file
// (removed by rotation) adds nothing.
func readKeys(name string, off int64, keys map[string]struct{}) error {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		if k := lineKey(sc.Bytes()); k != "" {
			keys[k] = struct{}{}
		}
	}
	return sc.Err()
}

// lineKey returns the occurrence key of a line: fanout.key in the default
// record, uid and count in format fanout; "" for a line with neither (a
// layout's).
func lineKey(line []byte) string {
	var k struct {
		UID    string `json:"uid"`
		Count  int32  `json:"count"`
		Fanout struct {
			Key string `json:"key"`
		} `json:"fanout"`
	}
	switch {
	case json.Unmarshal(line, &k) != nil:
		return ""
	case k.Fanout.Key != "":
		return k.Fanout.Key
	case k.UID != "":
		return Key(k.UID, k.Count)
	}
	return ""
}

// Close closes the file.
func (s *FileSink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.f.Close()
}
