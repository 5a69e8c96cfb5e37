package exporter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"
)

// memSink stores keys in memory; fail makes writes fail, gate (if set)
// blocks each write until a value is received from it.
type memSink struct {
	mu     sync.Mutex
	keys   []string
	fail   func(batch []*Occurrence) (int, error)
	gate   chan struct{}
	closed bool
	// reached, if set, is closed once target occurrences are stored.
	target  int
	reached chan struct{}
}

func (s *memSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := len(batch), error(nil)
	if s.fail != nil {
		n, err = s.fail(batch)
	}
	for _, o := range batch[:n] {
		s.keys = append(s.keys, o.Key())
		if s.reached != nil && len(s.keys) == s.target {
			close(s.reached)
		}
	}
	return n, err
}

func (s *memSink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *memSink) stored() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

var errDown = errors.New("sink down")

// occ returns an occurrence of event uid at count, in namespace ns.
func occ(uid string, count int32, ns string) *Occurrence {
	return &Occurrence{UID: uid, Count: count, APIVersion: CoreV1, Namespace: ns, Name: uid, Type: "Normal",
		Reason: "Test", Message: "message of " + uid, Regarding: ObjectRef{Kind: "Pod", Name: "p-" + uid}}
}

// receivers returns a configuration with one Wait receiver per sink,
// each matched by the root route.
func testConfig(t *testing.T, sinks ...Sink) *Config {
	t.Helper()
	c := &Config{}
	for i, s := range sinks {
		name := fmt.Sprintf("s%d", i)
		c.Receivers = append(c.Receivers, &Receiver{Name: name, Sink: s, Queue: Queue{Length: 16}, Batch: 4,
			RetryConfig: &RetryConfig{MaxTries: new(0), InitialBackoff: Duration(1e6), MaxBackoff: Duration(1e6)}})
		c.Route.Match = append(c.Route.Match, &Rule{Receiver: ReceiverRef{Name: name}})
	}
	if p := c.validate(); len(p) > 0 {
		t.Fatal(p)
	}
	return c
}

// built returns a function that fails t if err is set, closes s when t
// ends, and returns s: built(NewXSink(cfg))(t).
func built[S Sink](s S, err error) func(t *testing.T) S {
	return func(t *testing.T) S {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		return s
	}
}

// wantConfigErrors checks that a configuration of one receiver, named r,
// with each of the bodies, is rejected with an error containing the
// body's message.
func wantConfigErrors(t *testing.T, bodies map[string]string) {
	t.Helper()
	for body, want := range bodies {
		_, err := ParseConfig("c.yaml", []byte("receivers:\n  - name: r\n    "+body+"\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", body, err, want)
		}
	}
}

// wantFailure checks that a write stored nothing and failed, with a
// permanent error or not.
func wantFailure(t *testing.T, what string, n int, err error, permanent bool) {
	t.Helper()
	if n != 0 || err == nil || IsPermanent(err) != permanent {
		t.Errorf("%s: n %d, err %v; want nothing stored and permanent=%v", what, n, err, permanent)
	}
}

// deadAddr returns the host:port of a server that is gone.
func deadAddr() string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.Listener.Addr().String()
}

// wantStatusClasses makes s's server answer each status of classes in
// turn (with answer) and checks that a write then fails, with a permanent
// error or not as classes says.
func wantStatusClasses(t *testing.T, s Sink, answer func(status int), classes map[int]bool) {
	t.Helper()
	for status, permanent := range classes {
		answer(status)
		n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
		wantFailure(t, fmt.Sprint("status ", status), n, err, permanent)
	}
}

// otherWarnings returns ws without the warning of a configuration whose
// route names no receiver (the sink tests' configurations have none).
func otherWarnings(ws []string) []string {
	return slices.DeleteFunc(slices.Clone(ws), func(w string) bool { return strings.Contains(w, "no rule names a receiver") })
}

// writeConcurrently makes writers goroutines write batches of batch
// occurrences each to s, rounds times, and returns the keys written.
func writeConcurrently(t *testing.T, s Sink, writers, rounds, batch int) []string {
	t.Helper()
	var mu sync.Mutex
	var keys []string
	var g errgroup.Group
	for w := range writers {
		g.Go(func() error {
			for r := range rounds {
				b := make([]*Occurrence, batch)
				for i := range b {
					b[i] = occ(fmt.Sprintf("w%d-r%d-%d", w, r, i), 1, "ns")
				}
				if n, err := s.Write(context.Background(), b); n != len(b) || err != nil {
					return fmt.Errorf("wrote %d of %d: %v", n, len(b), err)
				}
				mu.Lock()
				for _, o := range b {
					keys = append(keys, o.Key())
				}
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// wantEachOnce checks that got holds every key of want once, and nothing
// else.
func wantEachOnce(t *testing.T, got, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, k := range got {
		seen[k]++
	}
	missing, twice := 0, 0
	for _, k := range want {
		switch seen[k] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	if missing != 0 || twice != 0 || len(got) != len(want) {
		t.Errorf("%d records for %d occurrences: %d missing, %d written more than once", len(got), len(want), missing, twice)
	}
}
