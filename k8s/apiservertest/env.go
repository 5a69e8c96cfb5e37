package apiservertest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ReadyTimeout bounds how long etcd and kube-apiserver may take to become
// ready, per start.
const ReadyTimeout = 60 * time.Second

// AdminUser is the user the [Env.Config] bearer token authenticates as; it is
// in the system:masters group, which RBAC authorization (the mode the server
// runs with) lets do anything. Other identities, such as a ServiceAccount
// impersonated by the admin, get what RBAC objects grant them.
const AdminUser = "admin"

// startAttempts is how often a first start is tried with fresh ports when a
// port picked as free was taken by someone else in the meantime.
const startAttempts = 3

// Env is a kube-apiserver and its etcd, both on 127.0.0.1, with their
// files in a temporary directory. Create one with [Start] or [New]; its
// methods are safe for concurrent use.
type Env struct {
	dir          string
	apiserverBin string
	etcdBin      string
	etcdURL      string // client URL
	etcdPeerURL  string
	apiPort      int
	certDir      string
	token        string
	config       *rest.Config

	mu        sync.Mutex
	etcd      *process
	apiserver *process
	stopped   bool
}

// Start starts an [Env] for t, failing t if that fails, and registers
// [Env.Stop] with t.Cleanup. When t has failed by then, the cleanup logs the
// end of both servers' output first.
func Start(t testing.TB) *Env {
	t.Helper()
	e, err := New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.mu.Lock()
			for _, p := range []*process{e.etcd, e.apiserver} {
				if p != nil {
					t.Logf("last output of %s:\n%s", p.name, p.logTail(30))
				}
			}
			e.mu.Unlock()
		}
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// New builds the binaries if needed (see [Binaries]), then starts etcd and
// kube-apiserver on free loopback ports and waits until kube-apiserver's
// /readyz answers 200. ctx bounds the wait (each server also gets at most
// [ReadyTimeout]). The caller must call [Env.Stop].
func New(ctx context.Context) (_ *Env, err error) {
	apiserverBin, etcdBin, err := Binaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fanout-e2e-")
	if err != nil {
		return nil, err
	}
	e := &Env{
		dir:          dir,
		apiserverBin: apiserverBin,
		etcdBin:      etcdBin,
		certDir:      filepath.Join(dir, "certs"),
	}
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()
	if err := e.writeFiles(); err != nil {
		return nil, err
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	err = onFreePorts(2, func(ports []int) error {
		e.etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		e.etcdPeerURL = "http://127.0.0.1:" + strconv.Itoa(ports[1])
		return e.startEtcd(ctx)
	})
	if err != nil {
		return nil, err
	}
	err = onFreePorts(1, func(ports []int) error {
		e.apiPort = ports[0]
		return e.startAPIServer(ctx)
	})
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(filepath.Join(e.certDir, "apiserver.crt"))
	if err != nil {
		return nil, fmt.Errorf("apiservertest: serving certificate: %w", err)
	}
	e.config = &rest.Config{
		Host:            e.Host(),
		BearerToken:     e.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
	}
	return e, nil
}

// onFreePorts calls start with n free loopback ports, and again with new
// ones, up to startAttempts times, while it fails because a port was taken
// meanwhile.
func onFreePorts(n int, start func(ports []int) error) error {
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(n)
		if err != nil {
			return err
		}
		err = start(ports)
		if err == nil || attempt == startAttempts || !addrInUse(err) {
			return err
		}
	}
}

// Config returns a new copy of the admin client configuration: the
// apiserver's URL, a bearer token of [AdminUser] and the self-signed serving
// CA. It stays valid across [Env.StopAPIServer] and [Env.StartAPIServer].
func (e *Env) Config() *rest.Config { return rest.CopyConfig(e.config) }

// Clientset returns a new clientset for [Env.Config].
func (e *Env) Clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(e.Config())
}

// MustClientset returns a new clientset for [Env.Config], failing t on error.
func (e *Env) MustClientset(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	cs, err := e.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Host returns kube-apiserver's base URL, https://127.0.0.1:PORT.
func (e *Env) Host() string { return "https://127.0.0.1:" + strconv.Itoa(e.apiPort) }

// EtcdURL returns etcd's client URL, http://127.0.0.1:PORT.
func (e *Env) EtcdURL() string { return e.etcdURL }

// Dir returns the temporary directory holding the servers' data, keys,
// certificates and logs (etcd.log, kube-apiserver.log). [Env.Stop] removes it.
func (e *Env) Dir() string { return e.dir }

// StopAPIServer stops kube-apiserver (SIGTERM, SIGKILL after a grace
// period) and waits for it to exit; etcd keeps running. Stopping a stopped
// kube-apiserver does nothing.
func (e *Env) StopAPIServer() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errors.New("apiservertest: env is stopped")
	}
	if e.apiserver != nil {
		e.apiserver.stop(stopGrace)
		e.apiserver = nil
	}
	return nil
}

// StartAPIServer starts kube-apiserver again after [Env.StopAPIServer] (or a
// crash), on the same port and with the same serving certificate, and waits
// until /readyz answers 200.
func (e *Env) StartAPIServer() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errors.New("apiservertest: env is stopped")
	}
	if e.apiserver != nil {
		if !e.apiserver.exited() {
			return errors.New("apiservertest: kube-apiserver is already running")
		}
		e.apiserver = nil
	}
	return e.startAPIServer(context.Background())
}

// Stop stops kube-apiserver and etcd (SIGTERM, SIGKILL after a grace
// period), waits for them to exit and removes the temporary directory. It
// is idempotent; after it returns no process or goroutine of e is left.
func (e *Env) Stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	e.stopped = true
	if e.apiserver != nil {
		e.apiserver.stop(stopGrace)
		e.apiserver = nil
	}
	if e.etcd != nil {
		e.etcd.stop(stopGrace)
		e.etcd = nil
	}
	return os.RemoveAll(e.dir)
}

func (e *Env) path(name string) string { return filepath.Join(e.dir, name) }

// writeFiles writes the token file and the service-account key pair.
func (e *Env) writeFiles() error {
	b := make([]byte, 16)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		return err
	}
	e.token = hex.EncodeToString(b)
	tokens := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", e.token, AdminUser, AdminUser)
	if err := os.WriteFile(e.path("tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}
	kp, err := serviceAccountKey()
	if err != nil {
		return err
	}
	if err := os.WriteFile(e.path("sa.key"), kp.key, 0o600); err != nil {
		return err
	}
	return os.WriteFile(e.path("sa.pub"), kp.pub, 0o644)
}

// serviceAccountKey is one RSA key pair per process, PEM-encoded: key
// generation is the slowest part of writeFiles under -race.
var serviceAccountKey = sync.OnceValues(func() (keyPair, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return keyPair{}, err
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{
		key: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}),
		pub: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
	}, nil
})

// keyPair is a PEM-encoded private key and its public key.
type keyPair struct{ key, pub []byte }

// startEtcd starts etcd and waits for /health; e.mu is held.
func (e *Env) startEtcd(ctx context.Context) error {
	args := []string{
		"--name=e2e",
		"--data-dir=" + e.path("etcd-data"),
		"--listen-client-urls=" + e.etcdURL,
		"--advertise-client-urls=" + e.etcdURL,
		"--listen-peer-urls=" + e.etcdPeerURL,
		"--initial-advertise-peer-urls=" + e.etcdPeerURL,
		"--initial-cluster=e2e=" + e.etcdPeerURL,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	p, err := startProcess("etcd", e.etcdBin, args, e.path("etcd.log"))
	if err != nil {
		return err
	}
	e.etcd = p
	if err := waitReady(ctx, p, e.etcdURL+"/health", "", func(body []byte) bool {
		return strings.Contains(string(body), `"health":"true"`)
	}); err != nil {
		p.stop(stopGrace)
		e.etcd = nil
		return err
	}
	return nil
}

// startAPIServer starts kube-apiserver and waits for /readyz; e.mu is held.
func (e *Env) startAPIServer(ctx context.Context) error {
	args := []string{
		"--etcd-servers=" + e.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(e.apiPort),
		"--cert-dir=" + e.certDir,
		"--service-account-key-file=" + e.path("sa.pub"),
		"--service-account-signing-key-file=" + e.path("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--token-auth-file=" + e.path("tokens.csv"),
		"--authorization-mode=RBAC",
		"--endpoint-reconciler-type=none",
		// No controller-manager creates service accounts.
		"--disable-admission-plugins=ServiceAccount",
		// Lighter and quicker to start; plain max-in-flight limits instead.
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	p, err := startProcess("kube-apiserver", e.apiserverBin, args, e.path("kube-apiserver.log"))
	if err != nil {
		return err
	}
	e.apiserver = p
	if err := waitReady(ctx, p, e.Host()+"/readyz", e.token, nil); err != nil {
		p.stop(stopGrace)
		e.apiserver = nil
		return err
	}
	return nil
}

// waitReady polls url until it answers 200 (and ok accepts the body, when
// set), p exits, ctx ends or ReadyTimeout passes.
func waitReady(ctx context.Context, p *process, url, token string, ok func([]byte) bool) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	tr := &http.Transport{
		// Only a readiness probe: the CA is read once the server is up.
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback probe
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	last := "no answer yet"
	for {
		status, body, err := get(ctx, client, url, token)
		switch {
		case err != nil:
			last = err.Error()
		case status == http.StatusOK && (ok == nil || ok(body)):
			return nil
		default:
			last = fmt.Sprintf("HTTP %d: %s", status, tail(body, 20))
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-p.done:
			t.Stop()
			return p.exitError()
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("apiservertest: %s not ready (%s: %s): %w; last output (%s):\n%s",
				p.name, url, last, ctx.Err(), p.logPath, p.logTail(40))
		}
	}
}

func get(ctx context.Context, client *http.Client, url, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, body, err
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func addrInUse(err error) bool {
	return strings.Contains(err.Error(), "address already in use")
}
