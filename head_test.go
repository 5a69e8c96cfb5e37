package fanout

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// The head's busy bit (head.go) against the slow path: many producers on every publish method race
// Watch/Stop/Stats/Taken/Shutdown; a reference watcher registered first
// gives the total order, and every other ring watcher must have received
// exactly ref[regSeq:end) (lossless) or an in-order subsequence (lossy).
func TestFastAndSlowPublishersKeepOneOrderWhileWatchersComeAndGo(t *testing.T) {
	for round := 0; round < 20; round++ {
		orderRound(t, round)
	}
}

type rv struct{ p, n int }

func orderRound(t *testing.T, round int) {
	opts := []Option{WithQueueLength(1 + round%8)}
	if round%3 == 1 {
		opts = append(opts, WithHistory(5))
	}
	b := New[rv](opts...)
	ref, err := b.Watch(WithQueueLength(1 << 16))
	if err != nil {
		t.Fatal(err)
	}
	var refGot []rv
	refDone := make(chan struct{})
	go func() {
		defer close(refDone)
		buf := make([]rv, 64)
		for {
			n, err := ref.Recv(context.Background(), buf)
			refGot = append(refGot, buf[:n]...)
			if err != nil {
				return
			}
		}
	}()
	type rec struct {
		w        *Watcher[rv]
		got      []rv
		lossless bool
		reg      uint64
	}
	var (
		mu   sync.Mutex
		recs []*rec
	)
	stop := make(chan struct{})
	var prod, churn, readers sync.WaitGroup
	const producers = 4
	var counts [producers]atomic.Int64
	for p := range producers {
		prod.Go(func() {
			n := 0
			for i := 0; i < 3000; i++ {
				switch (i + p) % 5 {
				case 0, 1:
					if b.Action(rv{p, n}) != nil {
						return
					}
					n++
				case 2:
					k := 1 + rand.IntN(4)
					vs := make([]rv, k)
					for j := range vs {
						vs[j] = rv{p, n + j}
					}
					m, _ := b.ActionBatch(vs)
					n += m
					if m < k {
						return
					}
				case 3:
					ok, err := b.ActionOrDrop(rv{p, n})
					if err != nil {
						return
					}
					if ok {
						n++
					}
				case 4:
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					_, err := b.ActionSeq(ctx, rv{p, n})
					cancel()
					if err == nil {
						n++
					}
				}
			}
			counts[p].Store(int64(n))
		})
	}
	for c := range 3 {
		churn.Go(func() {
			sem := make(chan struct{}, 4)
			for {
				select {
				case sem <- struct{}{}:
				case <-stop:
					return
				}
				select {
				case <-stop:
					return
				default:
				}
				beh := []FullChannelBehavior{WaitIfChannelFull, DropIfChannelFull, DropOldestIfChannelFull}[rand.IntN(3)]
				w, err := b.Watch(WithFullChannelBehavior(beh), WithQueueLength(1+rand.IntN(6)))
				if err != nil {
					<-sem
					return
				}
				w.mu.Lock()
				r := &rec{w: w, lossless: beh == WaitIfChannelFull, reg: w.regSeq}
				w.mu.Unlock()
				mu.Lock()
				recs = append(recs, r)
				mu.Unlock()
				limit := rand.IntN(200)
				readers.Go(func() {
					defer func() { <-sem }()
					buf := make([]rv, 1+rand.IntN(5))
					for {
						n, err := w.Recv(context.Background(), buf)
						r.got = append(r.got, buf[:n]...)
						if err != nil {
							return
						}
						if limit >= 0 && len(r.got) >= limit {
							go w.Stop()
							limit = -1
						}
					}
				})
				switch c {
				case 0:
					b.Stats()
				case 1:
					b.Taken()
				}
			}
		})
	}
	prod.Wait()
	close(stop)
	churn.Wait()
	b.Shutdown()
	readers.Wait()
	<-refDone
	total := 0
	for p := range producers {
		total += int(counts[p].Load())
	}
	if len(refGot) != total || uint64(total) != b.head.Load() {
		t.Fatalf("round %d: ref got %d, producers accepted %d, head %d", round, len(refGot), total, b.head.Load())
	}
	// per-producer order in ref
	last := map[int]int{}
	for _, v := range refGot {
		if l, ok := last[v.p]; ok && v.n != l+1 {
			t.Fatalf("round %d: producer %d: %d after %d", round, v.p, v.n, l)
		}
		last[v.p] = v.n
	}
	for _, r := range recs {
		r.w.mu.Lock()
		end := min(r.w.end, uint64(len(refGot)))
		r.w.mu.Unlock()
		want := refGot[r.reg:end]
		if r.lossless {
			if fmt.Sprint(r.got) != fmt.Sprint(want) {
				t.Fatalf("round %d: lossless watcher %d reg %d end %d: got %d values, want %d", round, r.w.id, r.reg, end, len(r.got), len(want))
			}
			continue
		}
		j := 0
		for _, v := range r.got {
			for j < len(want) && want[j] != v {
				j++
			}
			if j == len(want) {
				t.Fatalf("round %d: lossy watcher %d: %v not in order within its range", round, r.w.id, v)
			}
			j++
		}
	}
}

func TestHeadIsAlignedAndCountsEveryConcurrentValue(t *testing.T) {
	b := New[int]()
	if off := uintptr(unsafe.Pointer(&b.head.v)); off%8 != 0 {
		t.Fatalf("head misaligned: %x", off)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := 0; i < 10000; i++ {
				b.Action(i)
			}
		})
	}
	wg.Go(func() {
		for i := 0; i < 200; i++ {
			w, _ := b.Watch(WithFullChannelBehavior(DropIfChannelFull))
			w.Stop()
		}
	})
	wg.Wait()
	if got := b.Stats().Accepted; got != 40000 {
		t.Fatalf("accepted %d", got)
	}
}

// A holder of b.mu that waits for the busy bit says so (headWanted), and
// fast paths stand aside until it has the bit: a stream of fast publishers
// cannot starve Watch, Stop or Shutdown.
func TestHeadHoldMakesFastPathsStandAside(t *testing.T) {
	var h headWord
	h.release(7)
	if s, ok := h.tryHold(); !ok || s != 7 { // a fast path holds the bit
		t.Fatalf("tryHold = %d, %v; want 7, true", s, ok)
	}
	held := make(chan struct{})
	go func() {
		h.hold()
		close(held)
	}()
	for i := 0; atomic.LoadUint64(&h.v)&headWanted == 0; i++ {
		if i == 1_000_000 {
			h.release(7) // let hold return, then fail
			<-held
			t.Fatal("hold waited for the bit without saying it wants it")
		}
		runtime.Gosched()
	}
	h.release(8) // the fast path gives the bit up (and clears wanted)
	<-held
	if _, ok := h.tryHold(); ok {
		t.Fatal("a fast path took the bit the lock's holder holds")
	}
	if got := h.Load(); got != 8 {
		t.Fatalf("Load = %d, want 8 without the bits", got)
	}
	h.releaseHeld()
	if _, ok := h.tryHold(); !ok {
		t.Fatal("tryHold failed once the bit was given up")
	}
}

// While the lock's holder waits for the bit, fast paths refuse it.
func TestHeadTryHoldRefusesWhileTheLockWantsTheBit(t *testing.T) {
	var h headWord
	h.release(3 | headWanted)
	if _, ok := h.tryHold(); ok {
		t.Fatal("tryHold took the bit the lock's holder wants")
	}
	if got := h.Load(); got != 3 {
		t.Fatalf("Load = %d, want 3", got)
	}
}

// A parking reader's last look tells values published, a fast path in
// flight (whose plain store may not see the reader: it sleeps with a
// bound) and a holder of b.mu (which looks for parked readers after its
// store: the reader may sleep) apart.
func TestHeadLookTellsAFastPathInFlightFromTheLock(t *testing.T) {
	var h headWord
	look := func(s uint64, want int, when string) {
		t.Helper()
		if got := h.look(s); got != want {
			t.Fatalf("look(%d) %s = %d, want %d", s, when, got, want)
		}
	}
	h.release(5)
	look(5, headIdle, "at 5")
	look(4, headMoved, "at 5")
	if _, ok := h.tryHold(); !ok {
		t.Fatal("tryHold failed on a free word")
	}
	look(5, headInFlight, "with a fast path holding the bit")
	h.release(6)
	look(5, headMoved, "after the fast path stored 6")
	h.hold()
	look(6, headIdle, "with the lock's holder holding the bit")
	h.Store(7)
	look(6, headMoved, "after the lock's holder stored 7")
	h.releaseHeld()
	if got := h.Load(); got != 7 {
		t.Fatalf("Load = %d, want 7 without the bits", got)
	}
}
