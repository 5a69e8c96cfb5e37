package bigquerytest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// scope is the OAuth scope of the BigQuery API.
const scope = "https://www.googleapis.com/auth/bigquery"

// tokens is the fake's OAuth 2.0 server for service accounts.
type tokens struct {
	mu     sync.Mutex
	key    *rsa.PublicKey
	email  string
	issued map[string]bool
}

// ServiceAccountKey writes a service account key file (JSON, as the Cloud
// console downloads one) for client email email into t's temporary
// directory, with its token_uri the fake's token endpoint, and returns its
// path. The fake accepts tokens of this key only (of the last one made).
func (s *Server) ServiceAccountKey(t testing.TB, email string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	s.auth.mu.Lock()
	s.auth.key, s.auth.email = &key.PublicKey, email
	s.auth.mu.Unlock()
	b, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "p", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": email, "client_id": "1", "token_uri": s.URL + "/token"})
	path := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serveToken is the token endpoint: a JWT bearer grant (RFC 7523) signed
// by the service account's key, for audience aud and the BigQuery scope,
// gets an access token.
func (a *tokens) serveToken(w http.ResponseWriter, r *http.Request, aud string) {
	if r.Method != http.MethodPost || r.ParseForm() != nil ||
		r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
		return
	}
	if err := a.verify(r.PostForm.Get("assertion"), aud); err != "" {
		http.Error(w, `{"error":"invalid_grant","error_description":"`+err+`"}`, http.StatusBadRequest)
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := "ya29.fake-" + hex.EncodeToString(b)
	a.mu.Lock()
	a.issued[tok] = true
	a.mu.Unlock()
	answer(w, map[string]any{"access_token": tok, "expires_in": 3600, "token_type": "Bearer"})
}

// verify checks a JWT assertion, and returns what is wrong with it or "".
func (a *tokens) verify(assertion, aud string) string {
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return "not a JWT"
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	a.mu.Lock()
	key, email := a.key, a.email
	a.mu.Unlock()
	if err != nil || key == nil || rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig) != nil {
		return "bad signature"
	}
	var claims struct {
		Iss, Scope, Aud string
		Exp             int64
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if json.Unmarshal(payload, &claims) != nil || claims.Iss != email || claims.Aud != aud ||
		!strings.Contains(claims.Scope, scope) || time.Unix(claims.Exp, 0).Before(time.Now()) {
		return "bad claims"
	}
	return ""
}

// valid reports whether an Authorization header carries an issued token.
func (a *tokens) valid(header string) bool {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	a.mu.Lock()
	defer a.mu.Unlock()
	return ok && a.issued[tok]
}
