package debug_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/debug"
)

// A program registers its broadcaster with the view and mounts it; a
// watcher that nobody reads fills up, and the page (here its JSON) names
// it as the one a publisher waits for.
func Example() {
	b := fanout.New[string](fanout.WithQueueLength(2))
	defer b.Shutdown()
	audit, _ := b.Watch(fanout.WithName("audit")) // WaitIfChannelFull, and nobody reads it
	_, _ = b.Watch(fanout.WithName("metrics"), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))

	h, err := debug.New()
	if err != nil {
		panic(err)
	}
	h.Register(debug.Broadcaster("orders", b))
	mux := http.NewServeMux()
	mux.Handle("/debug/fanout", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	_ = b.Action("order 1")
	_ = b.Action("order 2")
	done := make(chan error)
	go func() { done <- b.Action("order 3") }() // waits for audit
	for len(b.Snapshot().Waiting) == 0 {
		time.Sleep(time.Millisecond)
	}

	resp, err := http.Get(srv.URL + "/debug/fanout?format=json")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var p debug.Page
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		panic(err)
	}
	o := p.Sections[0].Broadcasters[0]
	fmt.Printf("%s: %d accepted, %d watchers\n", o.Name, o.Accepted, o.Watchers)
	for _, w := range o.Waiting {
		fmt.Printf("a publisher waits for watcher %d %q, queue %d/%d\n", w.WatcherID, w.WatcherName, w.Queued, w.QueueLength)
	}
	for _, w := range o.WatcherList {
		fmt.Printf("watcher %d %q %s: %d/%d queued, blocking: %t\n", w.ID, w.Name, w.Behavior, w.Queued, w.QueueLength, w.BlockingSecs != nil)
	}

	_, _ = audit.Next(context.Background()) // room: the publisher goes on
	fmt.Println(<-done)
	// Output:
	// orders: 2 accepted, 2 watchers
	// a publisher waits for watcher 1 "audit", queue 2/2
	// watcher 1 "audit" WaitIfChannelFull: 2/2 queued, blocking: true
	// watcher 2 "metrics" DropIfChannelFull: 2/2 queued, blocking: false
	// <nil>
}
