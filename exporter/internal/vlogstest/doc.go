// Package vlogstest runs VictoriaLogs on loopback, as the real server of
// Loki's push API that the exporter's Loki sink is tested against (the e2e
// tests of github.com/fanout-go/fanout/exporter, sink_loki_e2e_test.go).
//
// Grafana Loki itself is not used: it is AGPL-licensed, which this
// repository's users may not run. VictoriaLogs (Apache-2.0) implements
// Loki's push API, JSON and protobuf, at [PushPath], and is queried back
// with LogsQL. It is not Loki, and where it differs a test against it
// proves nothing about Loki:
//
//   - it stores every entry pushed: an entry identical to a stored one
//     (same stream, timestamp and line), which Loki stores once, is stored
//     again;
//   - it answers 204 to a push with entries it drops (too old for the
//     retention, too far in the future), where Loki stores the others and
//     answers 400;
//   - a tenant (the X-Scope-OrgID header) is "AccountID:ProjectID", two
//     numbers; Loki takes any string.
//
// The exporter's fake Loki (fakeLoki in sink_loki_test.go) covers those.
//
// # Binary
//
// victoria-logs [Version] is built from source through the Go module proxy
// by binary.sh (embedded in the package; `make e2e-binaries` at the
// repository root runs the same file) and cached under the user's cache
// directory, os.UserCacheDir()/fanout-e2e/victoria-logs-<Version> (15 MB).
// The build takes 20 to 30 s on 2 cores with a throwaway Go build cache,
// about 70 s when its modules (232 MB) are not in the module cache yet;
// [Binary] runs the script when the binary is missing, so tests never skip
// for want of it.
//
// # Build tag
//
// Importing the package builds nothing; calling [Start] or [Binary] may.
// Tests that call them belong behind the e2e build tag (`//go:build e2e`),
// which `make test` sets.
//
// A typical test:
//
//	//go:build e2e
//
//	func TestSomething(t *testing.T) {
//		srv := vlogstest.Start(t) // killed by t.Cleanup
//		// push to srv.PushURL() ...
//		entries, err := srv.Query(t.Context(), "", "* | sort by (_time)")
//		...
//	}
//
// # Crashes
//
// [Server.Kill] kills the server with SIGKILL and [Server.Restart] starts
// it again on the same port with the same data. VictoriaLogs writes what it
// acknowledged to disk within -inmemoryDataFlushInterval (5 s), so a kill
// loses what it acknowledged just before; [Server.Persist] writes it at
// once, for a test that must tell what the server lost from what its
// client did not send. Every process and goroutine a [Server] starts ends
// in its cleanup, so the package can be used under goleak.
package vlogstest
