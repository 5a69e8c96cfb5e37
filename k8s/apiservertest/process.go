package apiservertest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// stopGrace is how long a process gets to exit after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// process is a running child whose stdout and stderr go to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logOff  int64         // size of the log file when this run started
	done    chan struct{} // closed once cmd.Wait returned
	err     error         // cmd.Wait's result, valid after done
}

// startProcess starts bin with args, appending its output to logPath.
func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own descriptor
	off, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	// An *os.File needs no copying goroutine: the child writes to it directly.
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("apiservertest: start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logOff: off, done: make(chan struct{})}
	// The only goroutine per process; it ends when the process exits, which
	// stop guarantees.
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// logTail returns the last lines this run of the process wrote.
func (p *process) logTail(n int) string {
	b, err := readFrom(p.logPath, p.logOff, 64<<10)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	return tail(b, n)
}

// exitError describes an unexpected exit, with the end of the log.
func (p *process) exitError() error {
	return fmt.Errorf("apiservertest: %s exited: %v; last output (%s):\n%s", p.name, p.err, p.logPath, p.logTail(40))
}

// readFrom reads at most max bytes from the end of path, not before off.
func readFrom(path string, off, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if start := fi.Size() - max; start > off {
		off = start
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}
