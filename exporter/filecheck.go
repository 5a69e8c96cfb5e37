package exporter

import "fmt"

// FileProblems reads the files the configuration names that a sink needs
// at start (the TLS CA, certificate and key files of every receiver) and
// returns a "line N: ..." problem for each that cannot be read or parsed.
// [ParseConfig] does not read them: a configuration can be parsed where
// its files are not; the command ([Main]) checks them before it starts,
// and with --check-config.
func (c *Config) FileProblems() []string {
	var p []string
	for _, r := range c.Receivers {
		if r == nil {
			continue
		}
		t := r.tlsConfig()
		if t == nil || (r.Kafka != nil && !r.Kafka.TLS.Enable) {
			continue
		}
		kind := "tls"
		if ks := r.kinds(); len(ks) > 0 {
			kind = ks[0].name
		}
		if _, err := t.clientTLS(kind); err != nil {
			p = append(p, fmt.Sprintf("line %d: receiver %q: %v", r.line, r.Name, err))
		}
	}
	return p
}
