package promtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// ReadyTimeout bounds how long a start may take until Prometheus answers
// /-/ready.
const ReadyTimeout = 30 * time.Second

// startAttempts is how often a start is tried with a fresh port when the
// port picked as free was taken by someone else in the meantime.
const startAttempts = 3

// Target is a program for Prometheus to scrape.
type Target struct {
	// Job is the job label of its series; the targets of one job share
	// its first target's Path.
	Job string
	// Addr is its host:port; Path the path of its metrics ("" for
	// /metrics).
	Addr, Path string
}

// Config is what [Start] gives Prometheus to do.
type Config struct {
	Targets []Target
	// RuleFiles are the rule files to load (absolute paths, or relative
	// to the test's working directory).
	RuleFiles []string
	// Interval is the scrape and evaluation interval (0: 1 s, the least
	// Prometheus takes).
	Interval time.Duration
}

// Server is a Prometheus on a loopback port, with its configuration and
// data in a test's temporary directory. Create one with [Start].
type Server struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL string
	// API is a client of its HTTP API.
	API v1.API

	cmd     *exec.Cmd
	done    chan struct{} // closed once cmd.Wait returned
	logPath string
}

// Start installs Prometheus if needed (see [Binaries]), starts it on a
// free loopback port with cfg, and waits until it is ready, failing t if
// any of that fails. A cleanup registered with t stops it and, when t has
// failed, logs the end of its output.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	bin, _, err := Binaries()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, configYAML(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		s, err := start(bin, conf, dir)
		if err == nil {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("last output of prometheus (%s):\n%s", s.logPath, logTail(s.logPath, 30))
				}
				s.stop()
			})
			return s
		}
		if attempt == startAttempts {
			t.Fatal(err)
		}
	}
}

// configYAML returns Prometheus's configuration of cfg. Strings are
// written quoted as JSON, which YAML reads as they are.
func configYAML(cfg Config) []byte {
	every := cfg.Interval
	if every <= 0 {
		every = time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n", every, every)
	b.WriteString("rule_files:\n")
	for _, f := range cfg.RuleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			abs = f
		}
		fmt.Fprintf(&b, "  - %s\n", strconv.Quote(abs))
	}
	b.WriteString("scrape_configs:\n")
	for _, job := range jobs(cfg.Targets) {
		fmt.Fprintf(&b, "  - job_name: %s\n    metrics_path: %s\n    static_configs:\n      - targets: [%s]\n",
			strconv.Quote(job.name), strconv.Quote(job.path), strings.Join(job.addrs, ", "))
	}
	return []byte(b.String())
}

// job is a scrape configuration: the targets of one job name.
type job struct {
	name, path string
	addrs      []string // quoted
}

// jobs groups the targets by job, in the order of their first target; a
// job's path is its first target's.
func jobs(targets []Target) []job {
	var out []job
	for _, tg := range targets {
		i := slices.IndexFunc(out, func(j job) bool { return j.name == tg.Job })
		if i < 0 {
			path := tg.Path
			if path == "" {
				path = "/metrics"
			}
			out = append(out, job{name: tg.Job, path: path})
			i = len(out) - 1
		}
		out[i].addrs = append(out[i].addrs, strconv.Quote(tg.Addr))
	}
	return out
}

// start starts Prometheus on a free port and waits until it is ready.
func start(bin, conf, dir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logPath := filepath.Join(dir, "prometheus.log")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child has its own descriptor
	cmd := exec.Command(bin, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{URL: "http://" + addr, cmd: cmd, done: make(chan struct{}), logPath: logPath}
	go func() { // the only goroutine; it ends with the process
		_ = cmd.Wait()
		close(s.done)
	}()
	client, err := api.NewClient(api.Config{Address: s.URL})
	if err == nil {
		s.API = v1.NewAPI(client)
		err = s.waitReady()
	}
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("prometheus on %s: %w\n%s", addr, err, logTail(logPath, 20))
	}
	return s, nil
}

// waitReady waits until Prometheus answers /-/ready with 200.
func (s *Server) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return errors.New("exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v", ReadyTimeout)
		case <-tick.C:
		}
	}
}

// stop ends the process (SIGTERM, SIGKILL after 10 s) and waits for it.
func (s *Server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logTail returns the last n lines of the file at path.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
