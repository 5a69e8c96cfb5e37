package fanoutnats_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/fanout-go/fanout/nats/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestProcessesLoseNothingWhenAConsumerIsKilledAndTheServerRestarts runs a
// NATS server, a publisher and three consumers as separate OS processes
// (this test binary, run again in a role, see runRole) over loopback TCP.
// The publisher forwards n values in frames to a JetStream stream; each
// consumer has a durable Consume feeding lossless watchers registered
// WithCommit that write each batch to stdout, take 20 ms per batch, then
// commit. One consumer is killed with SIGKILL a quarter of the way, and a
// new process takes its durable over; the server is restarted half-way.
//
// Every watcher of the surviving consumers writes 1..n once, in the
// stream's order. For the killed one, what each of its watchers wrote and
// what the successor's watcher wrote cover the stream in order: the
// successor begins at or before the first value some watcher of the killed
// process had not written, so nothing acknowledged was lost (values written
// by some of the killed process's watchers may come again: at least once).
// After the consumers' clean Close, every durable's ack floor is the
// stream's end: the next Consume of any of them redelivers nothing.
func TestProcessesLoseNothingWhenAConsumerIsKilledAndTheServerRestarts(t *testing.T) {
	n, watchers := 20_000, 10
	if testing.Short() {
		n, watchers = 3000, 3
	}
	srv := startServerProcess(t, t.TempDir(), server.RANDOM_PORT)
	url := "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.port))
	admin := natstest.JetStream(t, connectURL(t, url))
	natstest.Stream(t, admin, "EV", "ev")

	var consumers []*roleProcess
	for i := range 3 {
		consumers = append(consumers, startConsumerProcess(t, url, "d"+strconv.Itoa(i), watchers, n))
	}
	pub := startRole(t, "publisher", "URL="+url, "N="+strconv.Itoa(n), "FRAME=16")

	natstest.Eventually(t, "a quarter of the values at the first consumer", func() bool { return consumers[0].written(0) >= n/4 })
	killed := consumers[0]
	killed.kill(t)
	successor := startConsumerProcess(t, url, "d0", watchers, n)
	natstest.Eventually(t, "half of the values published", func() bool { return pub.progress() >= n/2 })
	srv.restart(t)

	for _, p := range append([]*roleProcess{pub, successor}, consumers[1:]...) {
		p.wait(t, 2*time.Minute)
	}
	t.Logf("publisher: %s", pub.lastLine("published"))
	order := checkSurvivors(t, consumers[1:], watchers, n)
	checkResumedAfterTheKill(t, order, killed, successor, watchers)
	for i := range 3 {
		if floor, last := serverAckFloor(t, admin, "EV", "d"+strconv.Itoa(i)), streamLastSeq(t, admin, "EV"); floor != last {
			t.Errorf("durable d%d: ack floor %d, stream ends at %d: its next consumer would get values again", i, floor, last)
		}
	}
}

// checkSurvivors checks that every watcher of the consumers that were not
// killed wrote 1..n once each, all in the same order (the stream's: a
// retried publish may be stored after the values sent with it), and that
// they closed cleanly; it returns that order.
func checkSurvivors(t *testing.T, consumers []*roleProcess, watchers, n int) []int {
	t.Helper()
	got := map[string][]event{}
	for i, c := range consumers {
		for w := range watchers {
			got[fmt.Sprintf("consumer %d, watcher %d", i+1, w)] = asEvents(c.valuesOf(w))
		}
		if line := c.lastLine("closed"); !strings.HasPrefix(line, "closed ok") {
			t.Errorf("consumer %d: %q, want a clean Close", i+1, line)
		}
		t.Logf("consumer %d: %s", i+1, c.lastLine("stats"))
	}
	checkSameOrderEachOnce(t, got, 1, n)
	return consumers[0].valuesOf(0)
}

func asEvents(seqs []int) []event {
	evs := make([]event, len(seqs))
	for i, s := range seqs {
		evs[i] = event{Seq: s}
	}
	return evs
}

// checkResumedAfterTheKill checks that nothing a watcher of the killed
// process had not written was acknowledged: in the stream's order, what
// each of its watchers wrote is a beginning, what the successor's watcher
// wrote is an end, and together they cover it.
func checkResumedAfterTheKill(t *testing.T, order []int, killed, successor *roleProcess, watchers int) {
	t.Helper()
	n, again := len(order), 0
	for w := range watchers {
		before, after := killed.valuesOf(w), successor.valuesOf(w)
		if !slices.Equal(before, order[:min(len(before), n)]) {
			t.Errorf("killed process, watcher %d: %v..., not the stream's beginning", w, head(before))
		}
		if !slices.Equal(after, order[n-min(len(after), n):]) {
			t.Errorf("successor, watcher %d: %v..., not the stream's end", w, head(after))
		}
		if len(before)+len(after) < n {
			t.Errorf("watcher %d of the killed process wrote %d values, the successor began with the %dth: %d values were acknowledged and lost",
				w, len(before), n-len(after)+1, n-len(before)-len(after))
		}
		again = max(again, len(before)+len(after)-n)
	}
	t.Logf("killed after its watchers wrote %d..%d values; the successor began with the %dth (%d values written again at most)",
		len(killed.valuesOf(watchers-1)), len(killed.valuesOf(0)), n-len(successor.valuesOf(0))+1, again)
	if line := successor.lastLine("closed"); !strings.HasPrefix(line, "closed ok") {
		t.Errorf("successor: %q, want a clean Close", line)
	}
}

func head(vs []int) []int { return vs[:min(len(vs), 5)] }

// connectURL connects to a server on TCP, reconnecting forever.
func connectURL(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, processConnOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func processConnOpts() []nats.Option {
	return []nats.Option{nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.ReconnectWait(20 * time.Millisecond), nats.ReconnectJitter(0, 0),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}
}

// roleProcess is this test binary run again in a role, with its stdout
// read line by line.
type roleProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser // held open: the process exits when it closes (see runRole)
	stderr bytes.Buffer
	done   chan struct{} // closed when stdout is read to its end

	mu     sync.Mutex
	lines  []string
	values map[int][]int // watcher -> values written, for consumers
}

// startRole starts this test binary in role, with env (KEY=value, each
// prefixed with FANOUTNATS_TEST_), and reads its stdout.
func startRole(t *testing.T, role string, env ...string) *roleProcess {
	t.Helper()
	p := &roleProcess{cmd: exec.Command(os.Args[0]), done: make(chan struct{}), values: map[int][]int{}}
	p.cmd.Env = append(os.Environ(), roleEnv+"="+role)
	for _, e := range env {
		p.cmd.Env = append(p.cmd.Env, "FANOUTNATS_TEST_"+e)
	}
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(out)
	t.Cleanup(func() {
		_ = p.stdin.Close()
		_ = p.cmd.Process.Kill()
		<-p.done
		_ = p.cmd.Wait()
		if t.Failed() && p.stderr.Len() > 0 {
			t.Logf("%s stderr:\n%s", role, p.stderr.String())
		}
	})
	return p
}

func (p *roleProcess) read(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		if w, vs, ok := parseWritten(line); ok {
			p.values[w] = append(p.values[w], vs...)
		} else {
			p.lines = append(p.lines, line)
		}
		p.mu.Unlock()
	}
}

// parseWritten parses a consumer's "w WATCHER FIRST-LAST ..." line.
func parseWritten(line string) (int, []int, bool) {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "w" {
		return 0, nil, false
	}
	w, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, nil, false
	}
	var vs []int
	for _, r := range f[2:] {
		a, b, _ := strings.Cut(r, "-")
		lo, err1 := strconv.Atoi(a)
		hi, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil {
			return 0, nil, false
		}
		for v := lo; v <= hi; v++ {
			vs = append(vs, v)
		}
	}
	return w, vs, true
}

func (p *roleProcess) written(w int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.values[w])
}

func (p *roleProcess) valuesOf(w int) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.values[w]
}

// progress returns the values the publisher said it had published.
func (p *roleProcess) progress() int {
	n, _ := strconv.Atoi(strings.TrimPrefix(p.lastLine("progress "), "progress "))
	return n
}

func (p *roleProcess) lastLine(prefix string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(p.lines[i], prefix) {
			return p.lines[i]
		}
	}
	return ""
}

// kill sends SIGKILL and waits until the process is gone.
func (p *roleProcess) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	_ = p.cmd.Wait()
}

// wait waits until the process exits, and fails the test unless it
// succeeded.
func (p *roleProcess) wait(t *testing.T, guard time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(guard):
		t.Fatalf("%v still running after %v; last lines %q", p.cmd.Env[len(p.cmd.Env)-1], guard, p.lines)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("%v: %v\n%s", p.cmd.Env[len(p.cmd.Env)-1], err, p.stderr.String())
	}
}

func startConsumerProcess(t *testing.T, url, durable string, watchers, n int) *roleProcess {
	t.Helper()
	return startRole(t, "consumer", "URL="+url, "DURABLE="+durable, "WATCHERS="+strconv.Itoa(watchers), "N="+strconv.Itoa(n))
}

// serverProcess is a NATS server in a process of its own.
type serverProcess struct {
	*roleProcess
	store string
	port  int
}

func startServerProcess(t *testing.T, store string, port int) *serverProcess {
	t.Helper()
	p := startRole(t, "server", "STORE="+store, "PORT="+strconv.Itoa(port))
	natstest.Eventually(t, "the server process", func() bool { return p.lastLine("ready") != "" })
	got, err := strconv.Atoi(strings.TrimPrefix(p.lastLine("ready"), "ready "))
	if err != nil {
		t.Fatal(err)
	}
	return &serverProcess{roleProcess: p, store: store, port: got}
}

// restart stops the server with SIGTERM (a clean shutdown) and starts a new
// process on the same port and store.
func (s *serverProcess) restart(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.wait(t, time.Minute)
	*s = *startServerProcess(t, s.store, s.port)
}

// roleEnv names the role this test binary runs instead of its tests.
const roleEnv = "FANOUTNATS_TEST_ROLE"

// runRole runs a role of TestProcessesLoseNothingWhenAConsumerIsKilledAndTheServerRestarts
// in this process, and returns its exit status. The process exits as soon
// as its stdin closes: when the test process is gone, even if it was
// killed before its clean-ups ran, no server is left behind.
func runRole(role string) int {
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(2)
	}()
	var err error
	switch role {
	case "server":
		err = serverRole()
	case "publisher":
		err = publisherRole()
	case "consumer":
		err = consumerRole()
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		return 1
	}
	return 0
}

func envInt(key string) int {
	v, _ := strconv.Atoi(os.Getenv("FANOUTNATS_TEST_" + key))
	return v
}

func envStr(key string) string { return os.Getenv("FANOUTNATS_TEST_" + key) }

// serverRole runs a JetStream server on loopback until SIGTERM, and
// prints "ready PORT" once it accepts connections.
func serverRole() error {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: envInt("PORT"), JetStream: true,
		StoreDir: envStr("STORE"), NoLog: true, NoSigs: true, ServerName: "proc"})
	if err != nil {
		return err
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		return errors.New("not ready after 30s")
	}
	fmt.Printf("ready %d\n", srv.Addr().(*net.TCPAddr).Port)
	<-term
	srv.Shutdown()
	srv.WaitForShutdown()
	return nil
}

// publisherRole forwards 1..N to the stream in frames of FRAME values, and
// prints its counts.
func publisherRole() error {
	nc, err := nats.Connect(envStr("URL"), processConnOpts()...)
	if err != nil {
		return err
	}
	defer nc.Close()
	out := fanout.New[event](fanout.WithQueueLength(1024))
	fwd, err := fanoutnats.Forward(out, nc, fanoutnats.ForwardConfig[event]{Subject: "ev", JetStream: true,
		Frame: envInt("FRAME"), AckTimeout: time.Second, RetryWait: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	n := envInt("N")
	for i := 1; i <= n; i++ {
		if err := out.Action(event{Seq: i}); err != nil {
			return err
		}
		if i%100 == 0 { // 10,000 values/s at most: the server restarts mid-stream
			time.Sleep(10 * time.Millisecond)
			fmt.Printf("progress %d\n", fwd.Stats().Published)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fwd.Close(ctx); err != nil {
		return err
	}
	st := fwd.Stats()
	fmt.Printf("published %d values in %d frames, %d retries, %d duplicates\n", st.Published, st.Frames, st.Retries, st.Duplicates)
	if st.Published != uint64(n) {
		return fmt.Errorf("published %d of %d", st.Published, n)
	}
	return nil
}

// consumerRole consumes the stream with durable DURABLE into WATCHERS
// lossless watchers registered WithCommit, each writing what it takes to
// stdout ("w WATCHER FIRST-LAST ..."), taking 20 ms per batch, then
// committing; once every watcher has written N, it closes and prints
// "closed ok" (or the error) and its counts.
func consumerRole() error {
	nc, err := nats.Connect(envStr("URL"), processConnOpts()...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	b := fanout.New[event](fanout.WithQueueLength(256))
	defer b.Shutdown()
	var stdout sync.Mutex
	var wg sync.WaitGroup
	for i := range envInt("WATCHERS") {
		w, err := b.Watch(fanout.WithCommit())
		if err != nil {
			return err
		}
		wg.Go(func() { writeEach(w, i, envInt("N"), &stdout) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	c, err := fanoutnats.Consume(ctx, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: envStr("DURABLE"), Start: fanoutnats.StartAll(),
		OnError: func(err error) { fmt.Fprintf(os.Stderr, "%v: %v\n", time.Since(start).Round(time.Millisecond), err) }})
	if err != nil {
		return err
	}
	wg.Wait()
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelClose()
	closed := "ok"
	if err := c.Close(closeCtx); err != nil {
		closed = err.Error()
	}
	fmt.Printf("closed %s\nstats %+v\n", closed, c.Stats())
	return nil
}

// writeEach writes each batch w takes, as one line and one write (so that
// a SIGKILL cannot cut it), waits 20 ms and commits, until it took n.
func writeEach(w *fanout.Watcher[event], id, n int, stdout *sync.Mutex) {
	buf := make([]event, 256)
	for {
		k, err := w.Recv(context.Background(), buf)
		if err != nil {
			return
		}
		line := []byte("w " + strconv.Itoa(id))
		for i := 0; i < k; {
			j := i
			for j+1 < k && buf[j+1].Seq == buf[j].Seq+1 {
				j++
			}
			line = fmt.Appendf(line, " %d-%d", buf[i].Seq, buf[j].Seq)
			i = j + 1
		}
		stdout.Lock()
		_, _ = os.Stdout.Write(append(line, '\n'))
		stdout.Unlock()
		time.Sleep(20 * time.Millisecond) // the watcher's own work
		w.Commit()
		if buf[k-1].Seq == n {
			return
		}
	}
}
