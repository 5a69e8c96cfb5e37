package exporter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// This file holds what the network sinks share: configuration checks,
// encoding a batch, and reading an HTTP answer.

// defaultSinkTimeout bounds a network sink's request when its timeout is
// not set.
const defaultSinkTimeout = 10 * time.Second

// httpURLProblem returns the problem of key's value raw when it is not an
// http or https URL, or "".
func httpURLProblem(key, raw string) string {
	if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%s %q is not an http or https URL", key, raw)
	}
	return ""
}

// scratch is the buffers of one write of a sink: the body of a request and
// the values of its header templates. Sinks lend them from a scratchPool,
// as several writers of a receiver ([Receiver].Writers) write at once.
type scratch struct{ body, head bytes.Buffer }

// scratchPool lends a sink's writes their scratch buffers. The zero value
// is ready.
type scratchPool struct{ p sync.Pool }

// get returns empty buffers.
func (sp *scratchPool) get() *scratch {
	if s, ok := sp.p.Get().(*scratch); ok {
		return s
	}
	return new(scratch)
}

// put takes s back, unless its body grew past 4 MiB (a batch that large
// is rare: its memory is not kept).
func (sp *scratchPool) put(s *scratch) {
	if s.body.Cap() > 4<<20 {
		return
	}
	s.body.Reset()
	s.head.Reset()
	sp.p.Put(s)
}

// appendProblem appends problem to p unless it is "".
func appendProblem(p []string, problem string) []string {
	if problem == "" {
		return p
	}
	return append(p, problem)
}

// connectionProblems sets a network sink's default timeout and returns the
// problems of its TLS configuration, naming the keys of sink kind.
func connectionProblems(kind string, timeout *Duration, t *TLSConfig) []string {
	if *timeout == 0 {
		*timeout = Duration(defaultSinkTimeout)
	}
	return t.validate(kind)
}

// httpTransport returns a transport of its own for a network sink, with
// the TLS configuration t (nil: the system's roots); errors name the keys
// of sink kind.
func httpTransport(kind string, t *TLSConfig) (*http.Transport, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if t != nil {
		tc, err := t.clientTLS(kind)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
	}
	return tr, nil
}

// encodeEach encodes the occurrences of batch in order, handing each
// record to add, until one cannot be encoded. It returns how many were
// added, and then the [Permanent] error of the one that was not.
func encodeEach(batch []*Occurrence, enc Encoder, add func(i int, o *Occurrence, rec []byte)) (int, error) {
	enc = enc.orDefault()
	for i, o := range batch {
		rec, err := enc(o)
		if err != nil {
			return i, Permanent(fmt.Errorf("occurrence %s: %w", o.Key(), err))
		}
		add(i, o, rec)
	}
	return len(batch), nil
}

// readAnswer reads up to limit bytes of resp's body, discards the rest (up
// to 1 MiB, so that the connection can be reused) and closes it.
func readAnswer(resp *http.Response, limit int64) []byte {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return body
}

// statusError returns nil for a 2xx answer, else an error about what
// with the answer's status and the start of its body: retryable when
// retry(status), else [Permanent]; a 413 is [errTooLarge].
func statusError(what string, resp *http.Response, body []byte, retry func(int) bool) error {
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusRequestEntityTooLarge:
		return Permanent(fmt.Errorf("%s: %s: %s: %w", what, resp.Status, snippet(body), errTooLarge))
	case retry(code):
		return fmt.Errorf("%s: %s: %s", what, resp.Status, snippet(body))
	}
	return Permanent(fmt.Errorf("%s: %s: %s", what, resp.Status, snippet(body)))
}

// errTooLarge marks the failure of a request that was too large for the
// server: a sink writes a batch of several occurrences in halves then
// (see [halvable]); a single occurrence is dropped.
var errTooLarge = errors.New("request too large")

// halvable reports whether err says that the request of batch was too
// large and batch can be halved: the sink then writes batch[:len/2], and
// the receiver writes the rest next.
func halvable(err error, batch []*Occurrence) bool {
	return len(batch) > 1 && errors.Is(err, errTooLarge)
}

// snippet returns the start of an answer's body, for an error message.
func snippet(body []byte) []byte {
	return bytes.TrimSpace(body[:min(len(body), 512)])
}

// retryableStatus reports whether an HTTP status may succeed later: 408,
// 429 and 5xx.
func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}
