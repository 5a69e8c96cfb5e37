package exporter

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// webhookFromConfig builds the sink of a one-webhook-receiver
// configuration.
func webhookFromConfig(t *testing.T, yaml string) *WebhookSink {
	t.Helper()
	c := parseOK(t, yaml)
	s, err := c.Receivers[0].build(c.ClusterName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	return s.(*WebhookSink)
}

func TestWebhookPostsTheLayoutAndTemplatedHeadersAsTheirsDoes(t *testing.T) {
	h := newHook(t)
	var got http.Header
	h.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() })
	c := parseOK(t, `clusterName: prod
receivers:
  - name: w
    webhook:
      endpoint: `+h.srv.URL+`
      headers:
        X-API-KEY: "123"
        X-Reason: "{{ .Reason }}/{{ .ClusterName }}"
        X-Broken: "{{ .Reason"
        X-Failing: "{{ .NoSuchField }}"
      layout: {msg: "{{ .Message }}"}
`)
	wantWarnings(t, c, `webhook header X-Broken: "{{ .Reason" is not a valid template; it is sent as it is`)
	s := webhookFromConfig(t, "clusterName: prod\nreceivers:\n  - name: w\n    webhook:\n      endpoint: "+h.srv.URL+
		"\n      headers: {X-API-KEY: \"123\", X-Reason: \"{{ .Reason }}/{{ .ClusterName }}\", X-Broken: \"{{ .Reason\", X-Failing: \"{{ .NoSuchField }}\"}\n")
	if _, err := s.Write(t.Context(), []*Occurrence{FromCore(backOffEvent())}); err != nil {
		t.Fatal(err)
	}
	if got.Get("X-API-KEY") != "123" || got.Get("X-Reason") != "BackOff/prod" || got.Get("X-Broken") != "{{ .Reason" ||
		got.Get("X-Failing") != "{{ .NoSuchField }}" {
		t.Errorf("headers %v", got)
	}
}

func TestWebhookBodyIsTheLayout(t *testing.T) {
	h := newHook(t)
	s := webhookFromConfig(t, "receivers:\n  - name: w\n    webhook:\n      endpoint: "+h.srv.URL+"\n      layout: {msg: \"{{ .Message }}\"}\n")
	if _, err := s.Write(t.Context(), []*Occurrence{occ("u", 1, "ns")}); err != nil {
		t.Fatal(err)
	}
	if len(h.bodies) != 1 || h.bodies[0] != `{"msg":"message of u"}` {
		t.Errorf("bodies %q", h.bodies)
	}
}

// writePEM writes a PEM block to a file in dir and returns its path.
func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// clientCert writes a self-signed client certificate and its key.
func clientCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, "client.crt", "CERTIFICATE", der), writePEM(t, dir, "client.key", "EC PRIVATE KEY", kder)
}

func TestWebhookTLSTrustsTheCAFileChecksServerNameAndPresentsTheClientCertificate(t *testing.T) {
	var clientCerts int
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clientCerts = len(r.TLS.PeerCertificates)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := writePEM(t, dir, "ca.crt", "CERTIFICATE", srv.Certificate().Raw)
	cert, key := clientCert(t, dir)
	write := func(tlsYAML string) error {
		s := webhookFromConfig(t, "receivers:\n  - name: w\n    webhook:\n      endpoint: "+srv.URL+"\n      tls: "+tlsYAML+"\n")
		_, err := s.Write(t.Context(), []*Occurrence{occ("u", 1, "ns")})
		return err
	}
	if err := write("{}"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: %v, want a certificate error", err)
	}
	if err := write("{caFile: " + ca + ", certFile: " + cert + ", keyFile: " + key + "}"); err != nil || clientCerts != 1 {
		t.Errorf("with the CA and a client certificate: %v, %d client certificates", err, clientCerts)
	}
	if err := write("{caFile: " + ca + ", serverName: other.example}"); err == nil {
		t.Error("a server name the certificate does not cover was accepted")
	}
	if err := write("{caFile: " + ca + ", serverName: example.com}"); err != nil {
		t.Errorf("serverName example.com (in the test certificate): %v", err)
	}
	if err := write("{insecureSkipVerify: true}"); err != nil {
		t.Errorf("insecureSkipVerify: %v", err)
	}
}

func TestWebhookTLSBadFilesAreClearErrors(t *testing.T) {
	_, err := ParseConfig("c.yaml", []byte("receivers:\n  - name: w\n    webhook: {endpoint: \"https://x\", tls: {keyFile: k}}\n"))
	if err == nil || !strings.Contains(err.Error(), "certFile and keyFile go together") {
		t.Errorf("key without cert: %v", err)
	}
	c := parseOK(t, "receivers:\n  - name: w\n    webhook: {endpoint: \"https://x\", tls: {caFile: /nonexistent/ca}}\n")
	if _, err := c.Receivers[0].build(""); err == nil || !strings.Contains(err.Error(), "webhook.tls.caFile") {
		t.Errorf("missing CA file: %v", err)
	}
}
