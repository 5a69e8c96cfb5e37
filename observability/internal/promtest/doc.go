// Package promtest runs Prometheus, Debian's package, on loopback, as the
// real Prometheus that the repository's Grafana dashboards and alerting
// rules (github.com/fanout-go/fanout/observability) are tested against:
// it scrapes a running program, evaluates the rules, and answers the
// dashboards' queries through its HTTP API.
//
// # Binaries
//
// prometheus and promtool come from Debian's prometheus package, fetched
// with apt-get download and unpacked with dpkg -x by binary.sh (embedded
// in the package; `make e2e-binaries` at the repository root runs the same
// file) into the user's cache directory,
// os.UserCacheDir()/fanout-e2e/prometheus: nothing is installed on the
// system. That takes seconds; [Binaries] runs the script when they are
// missing, so tests never skip for want of them. On a machine without
// apt-get and dpkg, [Start] fails the test with the script's message.
//
// # Server
//
// [Start] runs Prometheus in the foreground with a configuration of its
// own, written in the test's temporary directory: the [Config]'s scrape
// targets and rule files, scraped and evaluated every [Config].Interval,
// its data in the temporary directory too. [Server.API] is the official
// client of its HTTP API (github.com/prometheus/client_golang/api). The
// process is stopped in the test's cleanup, and dies with the test binary
// if that dies first.
package promtest
