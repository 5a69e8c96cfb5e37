// Package natstest runs an embedded NATS server with JetStream for the
// tests of github.com/fanout-go/fanout/nats: it listens on no port (clients
// connect in-process), keeps its file store in the test's temporary
// directory, can be restarted on the same store, and registers every
// shutdown with t.Cleanup.
package natstest

import (
	"context"
	"errors"
	"net"
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
