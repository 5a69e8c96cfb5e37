// Package e2e runs a real kube-apiserver backed by a real etcd on loopback
// for the end-to-end tests of the k8s module.
//
// The binaries are built from source through the Go module proxy by
// hack/e2e-binaries.sh and cached under the user's cache directory
// (os.UserCacheDir()/fanout-e2e); [Binaries] runs that script when they are
// missing, so tests never skip for want of binaries. The first build takes
// several minutes (give a cold `go test` a generous -timeout, or run the
// script beforehand); later runs reuse the cache.
//
// A typical test:
//
//	func TestSomething(t *testing.T) {
//		env := e2e.Start(t) // stopped by t.Cleanup
//		cs := env.MustClientset(t)
//		...
//	}
//
// [Env.StopAPIServer] and [Env.StartAPIServer] take kube-apiserver down and
// bring it back on the same address and serving certificate while etcd keeps
// running, for outage tests. Every goroutine and process started by an [Env]
// ends in [Env.Stop], so the package can be used under goleak.
package e2e
