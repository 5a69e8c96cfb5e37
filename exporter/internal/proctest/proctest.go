// Package proctest runs the server processes of the exporter's tests
// (vlogstest's victoria-logs, rsyslogtest's rsyslogd): started with their
// output in a log file, killed with the test binary if it dies, waited
// for by one goroutine that ends with the process.
package proctest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
)

// Process is a running server whose output goes to a log file.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd.Wait returned
	err  error         // cmd.Wait's result, valid after done
}

// Start starts bin with args in dir, appending its output to logPath.
func Start(bin string, args []string, dir, logPath string) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	// An *os.File needs no copying goroutine: the child writes to it directly.
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	// The only goroutine per process; it ends when the process exits,
	// which Kill guarantees.
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process exited (cmd.Wait's result), once Done is closed.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL and waits for the exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Tail returns at most the last n lines of b.
func Tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
