package natsbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runJetStream measures a durable Consume reading cfg.JetStreamValues
// values from a stream into cfg.JetStreamWatchers lossless watchers (queue
// 100, read with Recv), acknowledging what they took: cfg.Reps runs, each
// with a new durable, from its creation until every watcher has every
// value. The stream is filled once beforehand, in memory, on an embedded
// JetStream server.
func runJetStream(cfg Config) (Case, error) {
	dir, err := os.MkdirTemp("", "natsbench-js")
	if err != nil {
		return Case{}, err
	}
	defer os.RemoveAll(dir)
	srv, err := server.NewServer(&server.Options{DontListen: true, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		return Case{}, err
	}
	srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if !srv.ReadyForConnections(10 * time.Second) {
		return Case{}, errors.New("natsbench: JetStream server not ready")
	}
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		return Case{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return Case{}, err
	}
	if err := fillStream(js, cfg.JetStreamValues); err != nil {
		return Case{}, err
	}
	rates := make([]float64, cfg.Reps)
	var acks uint64
	for rep := range cfg.Reps {
		elapsed, n, err := consumeOnce(js, cfg, "bench"+strconv.Itoa(rep))
		if err != nil {
			return Case{}, err
		}
		rates[rep], acks = float64(cfg.JetStreamValues)/elapsed.Seconds(), n
	}
	return jetStreamCase(cfg, rates, acks), nil
}

func jetStreamCase(cfg Config, rates []float64, acks uint64) Case {
	med := median(rates)
	a := int64(acks)
	return Case{Kind: KindJetStream, Label: fmt.Sprintf("%s N=%d", SystemJetStream, cfg.JetStreamWatchers),
		System: SystemJetStream, API: "Consume (durable) → Broadcaster, Recv", Queue: localQueue,
		Watchers: cfg.JetStreamWatchers, Subscribers: 1, WatchersPerSubscriber: cfg.JetStreamWatchers, Producers: 1,
		Reps: cfg.Reps, Published: int64(cfg.JetStreamValues), PublishedPerSec: med,
		DeliveredPerSec: med * float64(cfg.JetStreamWatchers),
		SpreadPct:       (slices.Max(rates) - slices.Min(rates)) / med * 100, Acks: &a}
}

// fillStream creates the stream "BENCH" in memory and stores n values, in
// rounds of 1000 asynchronous publishes (more at once stalled the client
// on a loaded VM).
func fillStream(js jetstream.JetStream, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), doneGuard)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{subject},
		Storage: jetstream.MemoryStorage}); err != nil {
		return err
	}
	for i := range n {
		if _, err := js.PublishAsync(subject, fmt.Appendf(nil, `{"src":0,"seq":%d}`, i)); err != nil {
			return err
		}
		if (i+1)%1000 != 0 && i+1 != n {
			continue
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			return errors.New("natsbench: filling the stream timed out")
		}
	}
	return nil
}

// consumeOnce reads the whole stream with a new durable into watchers and
// returns how long it took and how many acknowledgements it sent.
func consumeOnce(js jetstream.JetStream, cfg Config, durable string) (time.Duration, uint64, error) {
	b := fanout.New[value](fanout.WithQueueLength(localQueue))
	defer b.Shutdown()
	var wg sync.WaitGroup
	for range cfg.JetStreamWatchers {
		w, err := b.Watch()
		if err != nil {
			return 0, 0, err
		}
		wg.Go(func() {
			buf := make([]value, localQueue)
			for got := 0; got < cfg.JetStreamValues; {
				k, err := w.Recv(context.Background(), buf)
				if err != nil {
					return
				}
				got += k
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), doneGuard)
	defer cancel()
	start := time.Now()
	c, err := fanoutnats.Consume(ctx, js, b, fanoutnats.ConsumeConfig[value]{Stream: "BENCH", Durable: durable,
		Start: fanoutnats.StartAll()})
	if err != nil {
		return 0, 0, err
	}
	finished := waitGroupWithin(&wg, doneGuard)
	elapsed := time.Since(start)
	err = c.Close(ctx)
	if !finished {
		err = errors.New("natsbench: JetStream watchers still waiting")
	}
	if derr := js.DeleteConsumer(ctx, "BENCH", durable); err == nil {
		err = derr
	}
	return elapsed, c.Stats().Acks, err
}
