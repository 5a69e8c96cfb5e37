package fanout_test

import (
	"context"
	"fmt"

	"github.com/fanout-go/fanout"
)

func ExampleTopics_Publish() {
	t := fanout.NewTopics[string, int]()
	defer t.Shutdown()
	_ = t.Publish("orders", 1) // nobody listens: counted as unheard, nothing else
	w, _ := t.Watch("orders")
	_ = t.Publish("orders", 2)
	v, _ := w.Next(context.Background())
	fmt.Println("read", v)
	w.Stop() // its last watcher left: the topic goes away
	s := t.Stats()
	fmt.Printf("published %d, unheard %d, topics %d, retired %d\n", s.Published, s.Unheard, s.Topics, s.Retired)
	// Output:
	// read 2
	// published 2, unheard 1, topics 0, retired 1
}

func ExampleTopics_Watch() {
	t := fanout.NewTopics[string, int](fanout.WithHistory(2))
	defer t.Shutdown()
	for v := range 4 {
		_ = t.Publish("prices", v) // kept: the family has a history
	}
	w, _ := t.Watch("prices", fanout.WithReplay(2))
	_ = t.Publish("prices", 4)
	buf := make([]int, 8)
	n, _ := w.Recv(context.Background(), buf)
	fmt.Println(buf[:n])
	// Output:
	// [2 3 4]
}

// A watcher of several topics receives each topic's values in that topic's
// order; values of different topics come in no particular order.
func ExampleTopics_WatchTopics() {
	t := fanout.NewTopics[string, int]()
	w, _ := t.WatchTopics([]string{"a", "b"})
	for i := range 3 {
		_ = t.Publish("a", i)
		_ = t.Publish("b", 10+i)
		_ = t.Publish("c", 20+i) // not watched
	}
	t.Shutdown()
	byTopic := map[string][]int{}
	for m := range w.All(context.Background()) {
		byTopic[m.Topic] = append(byTopic[m.Topic], m.Value)
	}
	fmt.Println("a:", byTopic["a"])
	fmt.Println("b:", byTopic["b"])
	fmt.Println("closed:", w.Err())
	// Output:
	// a: [0 1 2]
	// b: [10 11 12]
	// closed: broadcaster already stopped
}

func ExampleTopics_WatchAll() {
	t := fanout.NewTopics[string, string]()
	all, _ := t.WatchAll()
	_ = t.Publish("pods", "pod-a") // the topic is created for the watcher of every topic
	_ = t.Publish("nodes", "node-1")
	t.Shutdown()
	n := 0
	for range all.All(context.Background()) {
		n++
	}
	fmt.Println(n, "values,", t.Stats().Topics, "topics,", t.Stats().Unheard, "unheard")
	// Output:
	// 2 values, 2 topics, 0 unheard
}

// A TopicPublisher publishes to one topic without looking it up each time,
// and follows it as it goes away and comes back.
func ExampleTopics_Publisher() {
	t := fanout.NewTopics[string, int]()
	defer t.Shutdown()
	orders := t.Publisher("orders") // creates nothing
	_ = orders.Publish(1)           // nobody listens: unheard
	w, _ := t.Watch("orders")
	_ = orders.Publish(2)
	v, _ := w.Next(context.Background())
	fmt.Println("read", v, "unheard", t.Stats().Unheard)
	// Output:
	// read 2 unheard 1
}

// PublishMessages keeps each topic's values in their order, and together.
func ExampleTopics_PublishMessages() {
	t := fanout.NewTopics[string, string]()
	pods, _ := t.Watch("pods")
	nodes, _ := t.Watch("nodes")
	n, err := t.PublishMessages([]fanout.Message[string, string]{
		{Topic: "pods", Value: "pod-a created"},
		{Topic: "nodes", Value: "node-1 ready"},
		{Topic: "pods", Value: "pod-a scheduled"},
	})
	fmt.Println(n, err)
	t.Shutdown()
	for v := range pods.All(context.Background()) {
		fmt.Println("pods:", v)
	}
	for v := range nodes.All(context.Background()) {
		fmt.Println("nodes:", v)
	}
	// Output:
	// 3 <nil>
	// pods: pod-a created
	// pods: pod-a scheduled
	// nodes: node-1 ready
}

// A watcher of several topics read in a select, beside a context.
func ExampleTopicsWatcher_ResultChan() {
	t := fanout.NewTopics[string, int]()
	w, _ := t.WatchTopics([]string{"a", "b"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_ = t.Publish("a", 1)
	_ = t.Publish("b", 2)
	t.Shutdown() // the channel closes after the values
	sum := 0
	for {
		select {
		case m, ok := <-w.ResultChan():
			if !ok {
				fmt.Println("sum", sum, "closed:", w.Err())
				return
			}
			sum += m.Value
		case <-ctx.Done():
			return
		}
	}
	// Output:
	// sum 3 closed: broadcaster already stopped
}
