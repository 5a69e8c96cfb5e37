// Package natstest runs embedded NATS servers with JetStream for the tests
// of github.com/fanout-go/fanout/nats: a [Server] that listens on no port
// (clients connect in-process), keeps its file store in the test's
// temporary directory and can be restarted on the same store, and a
// [Cluster] of servers on loopback TCP. Every shutdown is registered with
// t.Cleanup.
package natstest

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is an embedded NATS server. Its InProcessConn method connects to
// whichever instance is running, so clients created with [Server.Connect]
// reconnect to it after [Server.Restart].
type Server struct {
	opts server.Options

	mu  sync.Mutex
	srv *server.Server // nil while down
}

// Option changes the server's options before it starts.
type Option func(*server.Options)

// New starts a server with JetStream and a file store in t.TempDir(),
// listening on no port, and shuts it down at the end of the test.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	o := server.Options{
		DontListen: true,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		NoLog:      true,
		NoSigs:     true,
		ServerName: "natstest",
	}
	for _, f := range opts {
		f(&o)
	}
	s := &Server{opts: o}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start() error {
	o := s.opts // NewServer keeps and edits its options
	srv, err := server.NewServer(&o)
	if err != nil {
		return err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return errors.New("natstest: server not ready after 10s")
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	return nil
}

// InProcessConn connects to the running instance; it fails while the
// server is down.
func (s *Server) InProcessConn() (net.Conn, error) {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil, errors.New("natstest: server is down")
	}
	return srv.InProcessConn()
}

// Shutdown stops the server and waits for its goroutines. It is
// idempotent.
func (s *Server) Shutdown() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart shuts the server down and starts it again on the same store.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Shutdown()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// Varz returns the running instance's statistics (messages in and out).
func (s *Server) Varz(t testing.TB) *server.Varz {
	t.Helper()
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		t.Fatal("natstest: server is down")
	}
	v, err := srv.Varz(nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Connect returns a client connected in-process, which reconnects forever,
// every 10 ms, and is closed at the end of the test. Its asynchronous
// errors are not printed (the tests check what the bridges report).
func (s *Server) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	all := append([]nats.Option{nats.InProcessServer(s), nats.MaxReconnects(-1),
		nats.ReconnectWait(10 * time.Millisecond), nats.ReconnectJitter(0, 0),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}, opts...)
	nc, err := nats.Connect("", all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on nc.
func JetStream(t testing.TB, nc *nats.Conn, opts ...jetstream.JetStreamOpt) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// Stream creates a file-backed stream capturing subjects.
func Stream(t testing.TB, js jetstream.JetStream, name string, subjects ...string) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Eventually polls cond every millisecond until it holds, and fails the
// test if it does not within 30 s: a hang guard, not a timing assumption.
// It is for states that only the server or the NATS client can tell (a
// message stored, a subscription's buffer filled), where no channel can
// say when they are reached.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	guard := time.NewTimer(30 * time.Second)
	defer guard.Stop()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-guard.C:
			t.Fatalf("natstest: still waiting after 30s for %s", what)
		case <-poll.C:
		}
	}
}

// Cluster is a JetStream cluster of embedded servers on loopback: each
// listens for clients on a port of its own, has its own file store in the
// test's temporary directory, and routes to the others. Every shutdown is
// registered with t.Cleanup.
type Cluster struct {
	mu      sync.Mutex
	servers []*server.Server // nil once shut down
	urls    []string
}

// NewCluster starts n servers forming the JetStream cluster "natstest", and
// returns once JetStream answers on every one of them.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	routePorts := freePorts(t, n)
	var routes []*url.URL
	for _, p := range routePorts {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p))})
	}
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir() // removed after the servers are shut down (cleanups run last first)
	}
	c := &Cluster{}
	t.Cleanup(c.shutdownAll)
	for i := range n {
		o := &server.Options{
			ServerName: "n" + strconv.Itoa(i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: dirs[i], NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: routePorts[i]},
			Routes:  routes,
		}
		srv, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		srv.Start()
		if !srv.ReadyForConnections(10 * time.Second) {
			t.Fatalf("natstest: server %d not ready after 10s", i)
		}
		c.servers = append(c.servers, srv)
		c.urls = append(c.urls, srv.ClientURL())
	}
	for i := range n {
		nc := c.Connect(t, i)
		js := JetStream(t, nc)
		Eventually(t, "JetStream to answer on server "+strconv.Itoa(i), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := js.AccountInfo(ctx)
			return err == nil
		})
		nc.Close()
	}
	return c
}

// freePorts returns n TCP ports of the loopback interface that were free
// a moment ago: routes must be configured before the servers listen.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// Connect returns a client of server first that knows every server's URL,
// so that it reconnects to another when first goes down. It reconnects
// forever, every 10 ms, and is closed at the end of the test.
func (c *Cluster) Connect(t testing.TB, first int, opts ...nats.Option) *nats.Conn {
	t.Helper()
	urls := append([]string{c.urls[first]}, c.urls[:first]...)
	urls = append(urls, c.urls[first+1:]...)
	all := append([]nats.Option{nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(10 * time.Millisecond), nats.ReconnectJitter(0, 0),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}, opts...)
	nc, err := nats.Connect(strings.Join(urls, ","), all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// StreamLeader returns the index of the server that leads stream (of the
// global account), waiting until one does.
func (c *Cluster) StreamLeader(t testing.TB, stream string) int {
	t.Helper()
	leader := -1
	Eventually(t, "a leader for stream "+stream, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, s := range c.servers {
			if s != nil && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// Shutdown stops server i and waits for its goroutines. It is idempotent.
func (c *Cluster) Shutdown(i int) {
	c.mu.Lock()
	srv := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

func (c *Cluster) shutdownAll() {
	for i := range c.servers {
		c.Shutdown(i)
	}
}
