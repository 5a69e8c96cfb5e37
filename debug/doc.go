// Package debug is a live view of the broadcasters of a process: an
// [http.Handler] that shows, for each broadcaster a program registers with
// it (and the topics, recorders and runners built on them), its watchers,
// their queues and counters, the rates over the last seconds, and who
// holds a waiting publisher back, as an HTML page for people and as JSON
// for tools. It answers the question counters and logs leave to the
// reader: which watcher is full, for how long has the publisher waited
// for it, what was dropped and why.
//
//	h, err := debug.New()
//	if err != nil { ... }
//	h.Register(debug.Broadcaster("orders", b))
//	h.Register(debug.Recorder("audit", rec))
//	mux.Handle("/debug/fanout", h)
//
// It uses the standard library only: the page is one HTML document with
// its style, its script (a few lines, no framework) and its charts (inline
// SVG) inside, which refreshes itself every second (see [WithRefresh]) by
// fetching its own URL again, without a reload. It loads nothing from
// anywhere else: its Content-Security-Policy allows no other origin, image,
// font or frame.
//
// # What it shows
//
// For each broadcaster ([fanout.Broadcaster.Snapshot]):
//
//   - its counters ([fanout.Stats]): accepted, refused, dropped, panics,
//     wait reports, watchers; the rates of accepted and dropped values
//     with a sparkline of the last minute of page loads;
//   - each publish call waiting now for a full watcher, with the data of
//     a [fanout.WaitReport]: the watcher's ID and name, its queue, how long
//     the call has waited (at least: see [fanout.Wait].Timed), how many
//     goroutines are parked reading the watcher; and how many publishers
//     are queued behind it;
//   - each watcher: ID, name ([fanout.WithName]), full-queue strategy,
//     read path (pull, with its parked readers, or channel), queue length
//     and fill, delivered, filtered and dropped by reason, with the rates;
//     whether, and for how long, it blocks a publisher;
//   - the runner reading a watcher, if registered with it (a
//     [fanout.Recorder]'s runners always are): writes in flight, values
//     waiting for their key, written (and the rate), failures, retries,
//     and what it did not write, by reason ([fanout.RunnerStats]).
//
// A [Topics] source shows the family's totals and each topic as a
// broadcaster named by its key (as fmt prints it); a [Recorder] source its
// totals and its broadcaster (of a [fanout.Recorder], or of what is built
// on one: the broadcasters of github.com/fanout-go/fanout/k8s/record and
// k8s/events); a [Fields] source a program's own named values.
//
// fanout-eventer serves its view at /debug/fanout beside /metrics, and
// github.com/fanout-go/fanout/k8s/ctrl's WithDebugView mounts one on a
// controller-runtime manager's metrics server.
//
// The page lists the watchers that need attention first (those blocking a
// publisher, the longest wait first, then the fullest) and at most 50 per
// broadcaster ([WithLimit]; ?limit=0 shows all). The JSON
// (?format=json, the [Page] type) has the same data, every watcher unless
// ?limit= says otherwise.
//
// # What it exposes
//
// Names and counts, never a published value: the names given to
// broadcasters, watchers ([fanout.WithName]), runners and sections, the
// keys of topics as fmt prints them, the names of full-queue strategies,
// the values of [Fields] sources, and counters, queue lengths and
// durations. Mount it where those may be seen (an admin or metrics port,
// behind the same authentication as /metrics or net/http/pprof): it has
// no access control of its own. It cannot change anything: it serves GET
// and HEAD only (anything else is refused with 405), and no request
// parameter does more than choose the format and the number of rows.
//
// # What it costs
//
// Nothing until the page is loaded: registering a source stores it, and
// nothing runs in the background: no goroutine, no timer, no sampler, no
// work on the publish path. Each page load (and each refresh of an open
// page, every second; none while the page is hidden) reads every source:
// a broadcaster's [fanout.Broadcaster.Snapshot] holds its lock as long as
// [fanout.Broadcaster.Stats] does, then once more to list the watchers and
// the waits (O(watchers) each time), and reads each watcher's counters
// after. The rates come from those page loads: the handler keeps, for each
// broadcaster and watcher, the counters of the page loads at least a
// refresh period apart over the rate window (10 s, [WithRateWindow]) and,
// for a broadcaster, over the last 60 of them for its sparklines; a rate
// is the difference between now and the oldest of them in the window. So
// the first page load shows no rate (a dash; null in the JSON), and with
// nobody looking nothing is sampled. Series that a page load no longer
// sees (a watcher stopped) are forgotten; counters that go down (a
// broadcaster replaced under the same name) start their series afresh. Of
// two page loads at once, one that read a source before the other kept
// that source's newer counters shows its rates but keeps none of its
// counters: an older read is not taken for counters that went down.
//
// With 10,000 watchers (BenchmarkPageLoad10000Watchers, on a loaded
// 2-core VM): a broadcaster's Snapshot takes about 2.5 ms of CPU, of which
// its lock is held for the Stats part (0.15 ms) and a copy of the watcher
// list; the HTML page (50 watchers listed) about 25 ms and 6 MB of
// garbage; the JSON of every watcher (3.2 MB) about 20 ms; the HTML of
// every watcher (?limit=0, 6.6 MB) about 240 ms. A broadcaster's
// publishers are held up only while its lock is held, as for Stats.
//
// # Who waits for whom
//
// A publisher waiting for a [fanout.WaitIfChannelFull] watcher is timed
// only when the broadcaster needs it ([fanout.WithWaitReport], or a
// watcher whose wait is bounded), so that a lossless publisher does not
// read the clock each time it waits. Otherwise the wait is counted from
// the first page load that saw it, and the page says "at least". Register
// the broadcaster [fanout.WithWaitReport] to see the whole wait.
package debug
