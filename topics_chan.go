package fanout

import "context"

// ResultChan returns a channel that receives its values, for a select: the
// values [TopicsWatcher.Recv] would return, in the same orders. Its first
// call starts a goroutine that moves them from the topics' queues into the
// channel, whose capacity is the queue length; the goroutine holds one
// more value while the channel is full. The values it took count as
// delivered ([TopicsWatcher.Stats]). The channel closes once the watcher
// is closed ([Topics.Shutdown], an eviction) and every value has gone
// through it; [TopicsWatcher.Stop] ends the goroutine at once, and the
// channel closes after the values already in it: the rest, the one it held
// included, stay readable with Recv (which, called after Stop, first waits
// for the goroutine to have returned them: at once, unless it is in a
// filter or a behaviour of yours). Read the channel until it closes, or
// call Stop: a channel nobody reads keeps the goroutine waiting.
//
// Recv, Next and All still work: each value goes to one reader, the
// channel's goroutine or another.
func (g *TopicsWatcher[K, T]) ResultChan() <-chan Message[K, T] {
	g.chOnce.Do(func() {
		ch := make(chan Message[K, T], g.qlen)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		g.mu.Lock()
		g.ch, g.quit, g.pumped = ch, cancel, done
		quitted := g.quitted
		g.mu.Unlock()
		if quitted {
			cancel()
		}
		go g.pump(ctx, ch, done)
	})
	return g.ch
}

// pump moves values into ch until the watcher is closed and drained, or
// ctx ends (Stop). It takes no more values than ch has room for, but one
// when ch is full, so that it holds at most one value while it waits. It
// closes done when it returns, having left what it held to Recv.
func (g *TopicsWatcher[K, T]) pump(ctx context.Context, ch chan Message[K, T], done chan struct{}) {
	defer close(done)
	defer close(ch)
	buf := make([]Message[K, T], cap(ch))
	for ctx.Err() == nil {
		n, _ := g.recv(ctx, buf[:max(1, cap(ch)-len(ch))])
		if n == 0 || !g.send(ctx, ch, buf[:n]) {
			return // closed and drained, or stopped
		}
		clear(buf[:n])
	}
}

// send sends ms into ch, in order, unless ctx ends first: then it leaves
// the values not sent to Recv and returns false.
func (g *TopicsWatcher[K, T]) send(ctx context.Context, ch chan Message[K, T], ms []Message[K, T]) bool {
	for i, m := range ms {
		if ctx.Err() == nil {
			select {
			case ch <- m:
				continue
			case <-ctx.Done():
			}
		}
		g.mu.Lock()
		g.held = append(g.held, ms[i:]...)
		g.mu.Unlock()
		return false
	}
	return true
}

// pumpEnding returns, while the goroutine of ResultChan that Stop ended
// may still hold values it took (it leaves them to Recv as it returns),
// the channel closed when it has returned; nil otherwise. Recv waits for
// it, so that a read after Stop finds those values, in their order.
func (g *TopicsWatcher[K, T]) pumpEnding() chan struct{} {
	if !g.quittedOnce.Load() { // no lock on a read of a watcher not stopped
		return nil
	}
	g.mu.Lock()
	done := g.pumped
	g.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
		return done
	}
}

// awaitPump waits until pumpEnding has nothing to wait for, or ctx ends.
func (g *TopicsWatcher[K, T]) awaitPump(ctx context.Context) error {
	done := g.pumpEnding()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// takeHeld moves the values ResultChan's goroutine left to Recv into buf.
// Caller holds g.readMu.
func (g *TopicsWatcher[K, T]) takeHeld(buf []Message[K, T]) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := copy(buf, g.held)
	clear(g.held[:n])
	g.held = g.held[n:]
	return n
}
