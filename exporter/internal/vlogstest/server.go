package vlogstest

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter/internal/proctest"
)

// ReadyTimeout bounds how long a start may take until /health answers 200.
const ReadyTimeout = 60 * time.Second

// startAttempts is how often a first start is tried with a fresh port when
// the port picked as free was taken by someone else in the meantime.
const startAttempts = 3

// PushPath is the path of VictoriaLogs's implementation of Loki's push API.
const PushPath = "/insert/loki/api/v1/push"

// Entry is a log entry as a query returns it: its fields by name. _msg is
// the line as pushed, _time the timestamp (RFC 3339 with nanoseconds, UTC),
// _stream the stream's labels ({a="b",c="d"}, sorted), and each label is
// also a field of its own.
type Entry map[string]string

// Server is a victoria-logs process on 127.0.0.1 with its data in a test's
// temporary directory. Create one with [Start]; its methods are safe for
// concurrent use.
type Server struct {
	bin     string
	dir     string // the process's working directory, holding the log
	dataDir string // -storageDataPath
	addr    string // host:port, the same across restarts
	client  *http.Client

	mu      sync.Mutex
	proc    *proctest.Process // nil while killed
	stopped bool
}

// Start builds the binary if needed (see [Binary]), starts a server on a
// free loopback port with its data in a directory of t.TempDir, and waits
// until /health answers 200, failing t if any of that fails. A cleanup
// registered with t kills the server (the data is thrown away with the
// directory) and, when t has failed, logs the end of its output.
//
// The server runs with -retentionPeriod=100y, so that tests can use fixed
// dates (VictoriaLogs drops an entry outside the retention, answering the
// push with 204 all the same), and -loki.disableMessageParsing, so that a
// line that is JSON is stored verbatim in _msg rather than split into
// fields.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // removed after the cleanup below, which kills the server
	s := &Server{bin: bin, dir: dir, dataDir: filepath.Join(dir, "data"),
		client: &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last output of victoria-logs (%s):\n%s", s.logPath(), s.logTail(40))
		}
		s.stop()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		port, err := proctest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		err = s.start()
		if err == nil {
			return s
		}
		if attempt == startAttempts || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
	}
}

// URL returns the server's base URL, http://127.0.0.1:PORT.
func (s *Server) URL() string { return "http://" + s.addr }

// PushURL returns the URL of Loki's push API on the server ([PushPath]).
func (s *Server) PushURL() string { return s.URL() + PushPath }

// Kill kills the server with SIGKILL, as a crash does, and waits for it to
// exit. VictoriaLogs writes what it acknowledged to disk within
// -inmemoryDataFlushInterval (5 s): a kill loses what it had not written,
// unless [Server.Persist] wrote it. Killing a killed server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

// Restart kills the server with SIGKILL if it runs, then starts it again on
// the same port with the same data directory and waits until /health
// answers 200.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("vlogstest: server is stopped")
	}
	s.kill()
	return s.start()
}

// stop kills the server for good: Restart fails afterwards.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.kill()
}

// kill kills the process, if any, and waits for its exit; s.mu is held.
func (s *Server) kill() {
	if s.proc != nil {
		s.proc.Kill()
		s.proc = nil
	}
	// Connections to a dead server would be found broken at their next use.
	s.client.CloseIdleConnections()
}

// Persist makes what the server has acknowledged survive a kill: it
// flushes the pushed entries into searchable parts (/internal/force_flush)
// and makes a snapshot of every partition
// (/internal/partition/snapshot/create), which writes those parts to disk
// first. The snapshot's hard links stay in the data directory.
func (s *Server) Persist(ctx context.Context) error {
	if _, err := s.get(ctx, "/internal/force_flush"); err != nil {
		return err
	}
	_, err := s.get(ctx, "/internal/partition/snapshot/create")
	return err
}

// Query flushes what the server has acknowledged into searchable parts
// (/internal/force_flush), so that it is all found, then runs the LogsQL
// query (/select/logsql/query) over the tenant (AccountID:ProjectID, as a
// push's X-Scope-OrgID header names it; "" for the default tenant 0:0) and
// returns the entries found, in the order the query gives ("* | sort by
// (_time)" sorts them by time).
func (s *Server) Query(ctx context.Context, tenant, query string) ([]Entry, error) {
	if _, err := s.get(ctx, "/internal/force_flush"); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/select/logsql/query",
		strings.NewReader(url.Values{"query": {query}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if tenant != "" {
		account, project, _ := strings.Cut(tenant, ":")
		req.Header.Set("AccountID", account)
		req.Header.Set("ProjectID", cmp.Or(project, "0"))
	}
	body, err := s.do(req)
	if err != nil {
		return nil, err
	}
	var entries []Entry
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("vlogstest: query %q: answer line %q: %w", query, sc.Text(), err)
		}
		entries = append(entries, e)
	}
	return entries, sc.Err()
}

func (s *Server) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+path, nil)
	if err != nil {
		return nil, err
	}
	return s.do(req)
}

// do sends req and returns the body of a 200 answer.
func (s *Server) do(req *http.Request) ([]byte, error) {
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("vlogstest: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("vlogstest: %s %s: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("vlogstest: %s %s: HTTP %d: %s", req.Method, req.URL.Path, resp.StatusCode, proctest.Tail(body, 10))
	}
	return body, nil
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "victoria-logs.log") }

// start starts the process and waits until it is ready; s.mu is held.
func (s *Server) start() error {
	args := []string{
		"-storageDataPath=" + s.dataDir,
		"-httpListenAddr=" + s.addr,
		"-retentionPeriod=100y",
		"-loki.disableMessageParsing",
	}
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

// waitReady polls /health until it answers 200, p exits or ReadyTimeout
// passes.
func (s *Server) waitReady(p *proctest.Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	last := "no answer yet"
	for {
		_, err := s.get(ctx, "/health")
		if err == nil {
			return nil
		}
		last = err.Error()
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-t.C:
		case <-p.Done():
			t.Stop()
			return fmt.Errorf("vlogstest: victoria-logs exited: %v; last output (%s):\n%s", p.Err(), s.logPath(), s.logTail(40))
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("vlogstest: victoria-logs not ready (%s): %w; last output (%s):\n%s",
				last, ctx.Err(), s.logPath(), s.logTail(40))
		}
	}
}

// logTail returns the last n lines of the server's output (every run's).
func (s *Server) logTail(n int) string {
	f, err := os.Open(s.logPath())
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", s.logPath(), err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > 64<<10 {
		_, _ = f.Seek(-64<<10, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return proctest.Tail(b, n)
}
