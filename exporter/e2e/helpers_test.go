//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter"
	"github.com/fanout-go/fanout/k8s/apiservertest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// cluster returns a clientset of the shared API server (started on first
// use; the binaries are built when missing, never skipped), with no
// client-side rate limit.
func cluster(t *testing.T) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	cfg := apiservertest.Shared(t).Config()
	cfg.QPS, cfg.Burst = -1, 0
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, client
}

// keySet is a set of occurrence keys that signals when it holds a target.
type keySet struct {
	mu      sync.Mutex
	keys    map[string]int // key -> times received
	want    map[string]bool
	missing int
	full    chan struct{}
	// atLeast, if set, is closed once threshold distinct keys are in.
	threshold int
	atLeast   chan struct{}
}

// reach returns a channel closed once n distinct keys have been received.
func (s *keySet) reach(n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.threshold, s.atLeast = n, make(chan struct{})
	if len(s.keys) >= n {
		close(s.atLeast)
		s.atLeast = nil
	}
	return s.atLeast
}

func newKeySet(want map[string]bool) *keySet {
	s := &keySet{keys: map[string]int{}, full: make(chan struct{})}
	if want != nil {
		s.setWant(want)
	}
	return s
}

// setWant sets the keys wanted, counting those already received.
func (s *keySet) setWant(want map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want, s.missing = want, len(want)
	for k := range s.keys {
		if want[k] {
			s.missing--
		}
	}
	if s.missing == 0 {
		close(s.full)
	}
}

func (s *keySet) add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[key]++
	if s.atLeast != nil && len(s.keys) >= s.threshold {
		close(s.atLeast)
		s.atLeast = nil
	}
	if s.keys[key] == 1 && s.want[key] && s.missing > 0 {
		s.missing--
		if s.missing == 0 {
			close(s.full)
		}
	}
}

// has reports whether every key of keys has been received.
func (s *keySet) has(keys map[string]bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range keys {
		if s.keys[k] == 0 {
			return false
		}
	}
	return true
}

// wait waits until every wanted key has been received, failing t after d.
func (s *keySet) wait(t *testing.T, what string, d time.Duration) {
	t.Helper()
	select {
	case <-s.full:
	case <-time.After(d):
		s.mu.Lock()
		defer s.mu.Unlock()
		t.Fatalf("%s: %d of %d occurrences missing after %v", what, s.missing, len(s.want), d)
	}
}

// check fails t unless exactly the wanted keys were received, each once
// (or, with dupsAllowed, at least once), and returns the duplicates.
func (s *keySet) check(t *testing.T, what string, dupsAllowed bool) (dups int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, n := range s.keys {
		if !s.want[k] {
			t.Errorf("%s: unexpected occurrence %s", what, k)
		}
		dups += n - 1
	}
	for k := range s.want {
		if s.keys[k] == 0 {
			t.Errorf("%s: occurrence %s missing", what, k)
		}
	}
	if dups > 0 && !dupsAllowed {
		t.Errorf("%s: %d duplicates", what, dups)
	}
	return dups
}

// webhook is an httptest server recording the keys of the occurrences
// posted to it (JSON objects or arrays); while down it answers 503.
type webhook struct {
	*httptest.Server
	set  *keySet
	mu   sync.Mutex
	down bool
}

func newWebhook(t *testing.T, want map[string]bool) *webhook {
	w := &webhook{set: newKeySet(want)}
	w.Server = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.Close)
	return w
}

func (w *webhook) setDown(down bool) {
	w.mu.Lock()
	w.down = down
	w.mu.Unlock()
}

func (w *webhook) serve(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	down := w.down
	w.mu.Unlock()
	if down {
		http.Error(rw, "down for the test", http.StatusServiceUnavailable)
		return
	}
	var many []exporter.EnhancedEvent
	if json.Unmarshal(body, &many) != nil {
		var one exporter.EnhancedEvent
		if err := json.Unmarshal(body, &one); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		many = []exporter.EnhancedEvent{one}
	}
	for i := range many {
		if many[i].Fanout == nil {
			http.Error(rw, "no fanout object", http.StatusBadRequest)
			return
		}
		w.set.add(many[i].Fanout.Key)
	}
}

// natsServer starts a NATS server with JetStream on a free loopback port
// (child processes reach it too) and a stream EVENTS on events.>, with at
// most 256 KiB per message.
func natsServer(t *testing.T) string {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true, MaxPayload: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"},
		Duplicates: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL()
}

// streamKeys returns a key set of the message IDs in the stream EVENTS.
func streamKeys(t *testing.T, url string, want map[string]bool) *keySet {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(t.Context(), "EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	set := newKeySet(want)
	cons, err := st.OrderedConsumer(t.Context(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := st.Info(t.Context())
	for n := uint64(0); n < info.State.Msgs; {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			set.add(m.Headers().Get(jetstream.MsgIDHeader))
			n++
		}
		if batch.Error() != nil {
			t.Fatal(batch.Error())
		}
	}
	return set
}

// fileKeys returns a key set of the lines of a file sink's files (the
// current one and the rotated ones).
func fileKeys(t *testing.T, path string, want map[string]bool) *keySet {
	t.Helper()
	set := newKeySet(want)
	names, _ := filepath.Glob(path + ".*")
	for _, name := range append(names, path) {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var e exporter.EnhancedEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Fanout == nil {
				t.Errorf("%s: invalid record %q: %v", name, sc.Text(), err)
				continue
			}
			set.add(e.Fanout.Key)
		}
		f.Close()
		if sc.Err() != nil {
			t.Fatal(sc.Err())
		}
	}
	return set
}

// event returns an event in ns about a pod.
func event(ns string, i int, msg string) *corev1.Event {
	now := metav1.Now()
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("ev-%05d", i)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("pod-%d", i%100), APIVersion: "v1"},
		Reason:         "BackOff", Message: msg, Type: corev1.EventTypeWarning, Count: 1,
		FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "kubelet", Host: "node-1"},
	}
}

// createEvents creates events [from, to) in ns with workers concurrent
// clients, raising the count of every event whose index is a multiple of
// repeatEvery (if not 0) twice, to 3, with one update each. It returns the
// keys of the occurrences made, uid/count.
func createEvents(ctx context.Context, client kubernetes.Interface, ns string, from, to, workers, repeatEvery int) (map[string]bool, error) {
	var mu sync.Mutex
	keys := map[string]bool{}
	g, ctx := errgroup.WithContext(ctx)
	for w := range workers {
		g.Go(func() error {
			for i := from + w; i < to; i += workers {
				e, err := client.CoreV1().Events(ns).Create(ctx, event(ns, i, fmt.Sprintf("back-off restarting container %d", i)), metav1.CreateOptions{})
				if err != nil {
					return err
				}
				add := []string{exporter.Key(string(e.UID), 1)}
				for repeatEvery > 0 && i%repeatEvery == 0 && e.Count < 3 {
					e.Count++
					e.LastTimestamp = metav1.Now()
					if e, err = client.CoreV1().Events(ns).Update(ctx, e, metav1.UpdateOptions{}); err != nil {
						return err
					}
					add = append(add, exporter.Key(string(e.UID), e.Count))
				}
				mu.Lock()
				for _, k := range add {
					keys[k] = true
				}
				mu.Unlock()
			}
			return nil
		})
	}
	return keys, g.Wait()
}

// runExporter runs exporter.Run in-process until the returned stop is
// called; stop returns Run's error.
func runExporter(t *testing.T, opts exporter.Options) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- exporter.Run(ctx, opts) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-errc })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// parse parses a configuration, failing t if it is invalid.
func parse(t *testing.T, yaml string) *exporter.Config {
	t.Helper()
	c, err := exporter.ParseConfig("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// kubeconfig writes a kubeconfig for cfg (admin token, the serving CA).
func kubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "admin"}
	kc.CurrentContext = "e2e"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// httpGet returns the body of a GET of url, failing t unless it answers 200.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}
