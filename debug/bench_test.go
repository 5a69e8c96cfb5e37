package debug_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/debug"
)

// benchEvent is the value of the benchmarks, as in the core's and the
// harness's: a pointer to a value with a size.
type benchEvent struct{ _ int }

// BenchmarkPublishWithTheViewMounted is the README's workload (one
// producer, N watchers each drained by its own goroutine with Recv, queue
// length 100, lossless) without the view (view=none) and with the
// broadcaster registered on a view served by a running HTTP server that
// nobody loads (view=mounted). The pairs are sub-benchmarks of one
// function, so `go test -count=n` runs them interleaved.
func BenchmarkPublishWithTheViewMounted(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		for _, mounted := range []bool{false, true} {
			name := "none"
			if mounted {
				name = "mounted"
			}
			b.Run(fmt.Sprintf("watchers=%d/view=%s", n, name), func(b *testing.B) {
				benchPublish(b, n, mounted)
			})
		}
	}
}

func benchPublish(b *testing.B, watchers int, mounted bool) {
	bc := fanout.New[*benchEvent]()
	if mounted {
		serve(b, bc)
	}
	var wg sync.WaitGroup
	received := make([]int, watchers)
	for i := range watchers {
		w, err := bc.Watch()
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			buf := make([]*benchEvent, fanout.DefaultQueueLength)
			for {
				n, err := w.Recv(context.Background(), buf)
				received[i] += n
				if err != nil {
					return
				}
			}
		})
	}
	ev := &benchEvent{}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := bc.Action(ev); err != nil {
			b.Fatal(err)
		}
	}
	bc.Shutdown()
	wg.Wait()
	b.StopTimer()
	total := 0
	for _, r := range received {
		total += r
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "deliveries/s")
}

// BenchmarkPageLoad10000Watchers is the cost of a page load of a
// broadcaster with 10,000 watchers, a tenth of them full, one of which a
// publisher waits for: the broadcaster's Stats and Snapshot alone (what
// holds its lock), then the JSON of every watcher, the HTML page (50
// watchers listed, the default) and the HTML of every watcher, each
// through a real HTTP server. bytes/page is the size of the response.
func BenchmarkPageLoad10000Watchers(b *testing.B) {
	bc, stop := stalledBroadcaster(b, 10000)
	defer stop()
	srv := serve(b, bc)
	b.Run("stats", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			bc.Stats()
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("snapshot", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			bc.Snapshot()
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
	for _, q := range []string{"?format=json", "", "?limit=0"} {
		b.Run("get"+q, func(b *testing.B) {
			b.ReportAllocs()
			var size int64
			cpu := cpuTime()
			for b.Loop() {
				resp, err := srv.Client().Get(srv.URL + q)
				if err != nil {
					b.Fatal(err)
				}
				size, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatal(resp.Status)
				}
			}
			b.ReportMetric(float64(size), "bytes/page")
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// stalledBroadcaster returns a broadcaster with n watchers of queue
// length 10 that nobody reads: one in ten waits when full, the others
// drop; 10 values fill every queue, and a publisher waits with the 11th.
func stalledBroadcaster(b *testing.B, n int) (*fanout.Broadcaster[*benchEvent], func()) {
	bc := fanout.New[*benchEvent](fanout.WithQueueLength(10))
	for i := range n {
		beh := fanout.DropIfChannelFull
		if i%10 == 0 {
			beh = fanout.WaitIfChannelFull
		}
		if _, err := bc.Watch(fanout.WithName(fmt.Sprintf("watcher %d", i)), fanout.WithFullChannelBehavior(beh)); err != nil {
			b.Fatal(err)
		}
	}
	for range 10 {
		if err := bc.Action(&benchEvent{}); err != nil {
			b.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = bc.Action(&benchEvent{})
	}()
	for len(bc.Snapshot().Waiting) == 0 {
		runtime.Gosched()
	}
	return bc, func() {
		bc.Shutdown()
		<-done
	}
}

// serve serves the view of bc, registered as "bench", on a running HTTP
// server closed when b ends.
func serve(b *testing.B, bc *fanout.Broadcaster[*benchEvent]) *httptest.Server {
	h, err := debug.New()
	if err != nil {
		b.Fatal(err)
	}
	h.Register(debug.Broadcaster("bench", bc))
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return srv
}
