// Package apiservertest runs a real kube-apiserver backed by a real etcd on
// loopback, for the end-to-end tests of this repository's modules (the k8s
// adapter's e2etest package, and any other module that imports it with a
// replace of github.com/fanout-go/fanout/k8s).
//
// It is test support, published only because Go's internal packages cannot
// cross module boundaries: its API carries no stability promise and may
// change in any release.
//
// # Binaries
//
// kube-apiserver [KubeVersion] and etcd [EtcdVersion] are built from source
// through the Go module proxy by binaries.sh (embedded in the package; `make
// e2e-binaries` at the repository root runs the same file) and cached under
// the user's cache directory, os.UserCacheDir()/fanout-e2e (about 125 MB).
// The build uses a throwaway Go build cache, removed when it ends, so that
// the ~5 GB of compiler output it needs once does not stay on disk. [Binaries]
// runs the script when the binaries are missing, so tests never skip for
// want of them; the first build takes about 7 minutes on 2 cores (give a
// cold `go test` a generous -timeout, or run `make e2e-binaries` first).
//
// # Build tag
//
// Importing the package builds nothing; calling [Start], [New] or [Binaries]
// may. Tests that call them belong behind the e2e build tag
// (`//go:build e2e`), which `make test` sets, so that a plain
// `go test ./...` never starts a seven-minute build by surprise.
//
// A typical test:
//
//	//go:build e2e
//
//	func TestSomething(t *testing.T) {
//		env := apiservertest.Start(t) // stopped by t.Cleanup
//		cs := env.MustClientset(t)
//		...
//	}
//
// [Env.StopAPIServer] and [Env.StartAPIServer] take kube-apiserver down and
// bring it back on the same address and serving certificate while etcd keeps
// running, for outage tests. Every goroutine and process started by an [Env]
// ends in [Env.Stop], so the package can be used under goleak.
package apiservertest
