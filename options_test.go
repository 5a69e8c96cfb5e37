package fanout_test

import (
	"context"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// An invalid option given to New is not silently kept until the first
// Watch: every call that can return an error returns it.
func TestInvalidBroadcasterOptionIsReportedByEveryCall(t *testing.T) {
	b := fanout.New[int](fanout.WithQueueLength(-5))
	defer b.Shutdown()
	const want = "invalid queue length -5"
	assert.ErrorContains(t, b.Action(1), want)
	assert.ErrorContains(t, b.ActionContext(context.Background(), 1), want)
	ok, err := b.ActionOrDrop(1)
	assert.False(t, ok)
	assert.ErrorContains(t, err, want)
	n, err := b.ActionBatch([]int{1, 2})
	assert.Zero(t, n)
	assert.ErrorContains(t, err, want)
	_, err = b.Watch()
	assert.ErrorContains(t, err, want)
	_, err = b.WatchWithPrefix([]int{1})
	assert.ErrorContains(t, err, want)
	assert.Zero(t, b.Stats().Accepted)
}

// Options are typed per target: a recorder option given to a broadcaster or
// a watcher, or a watcher's behaviour given to a recorder, does not compile.
// The check type-checks small programs against this package's source.
func TestMisplacedOptionsDoNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the package from source")
	}
	if build.Default.GOROOT == "" {
		// A test built with -trimpath (as make test builds them) does not
		// know its GOROOT, where the source importer finds the standard
		// library: ask the go command, which type-checking from source
		// runs anyway.
		out, err := exec.Command("go", "env", "GOROOT").Output()
		require.NoError(t, err, "go env GOROOT")
		build.Default.GOROOT = strings.TrimSpace(string(out))
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil)
	check := func(stmt string) error {
		src := "package p\nimport (\"time\"; \"github.com/fanout-go/fanout\")\nvar _ = time.Second\n" +
			"func f(b *fanout.Broadcaster[int]) { " + stmt + " }\n"
		f, err := parser.ParseFile(fset, "p.go", src, 0)
		require.NoError(t, err)
		_, err = (&types.Config{Importer: imp}).Check("p", fset, []*ast.File{f}, nil)
		return err
	}
	require.NoError(t, check(`_, _ = fanout.NewRecorder[int](fanout.WithQueueLength(1), fanout.WithDropHandler(nil), fanout.WithRetry(fanout.DefaultRetryPolicy()))
		_ = fanout.New[int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(nil), fanout.WithHistory(1), fanout.WithReplay(1))
		_, _ = b.Watch(fanout.WithQueueLength(1), fanout.WithDropHandler(nil), fanout.WithReplay(1))`),
		"the well-placed options compile")
	for name, stmt := range map[string]string{
		"retry policy to New":        `_ = fanout.New[int](fanout.WithRetry(fanout.DefaultRetryPolicy()))`,
		"stamp hook to Watch":        `_, _ = b.Watch(fanout.WithStamp(func(v int, _ time.Time) int { return v }))`,
		"clock to WatchWithPrefix":   `_, _ = b.WatchWithPrefix(nil, fanout.WithClock(nil))`,
		"logger to New":              `_ = fanout.New[int](fanout.WithLogger(nil))`,
		"behaviour to NewRecorder":   `_, _ = fanout.NewRecorder[int](fanout.WithFullChannelBehavior(nil))`,
		"history to NewRecorder":     `_, _ = fanout.NewRecorder[int](fanout.WithHistory(3))`,
		"replay to NewRecorder":      `_, _ = fanout.NewRecorder[int](fanout.WithReplay(3))`,
		"an Option to a RecorderOpt": `var o fanout.Option = fanout.WithQueueLength(1); _, _ = fanout.NewRecorder[int](o)`,
	} {
		t.Run(name, func(t *testing.T) {
			err := check(stmt)
			assert.ErrorContains(t, err, "cannot use")
			assert.ErrorContains(t, err, "Option")
		})
	}
}

// A nil context is a mistake every call reports, doing nothing else; it
// never means "no deadline".
func TestNilContextIsAnErrorThatDoesNothing(t *testing.T) {
	var nilCtx context.Context // a variable: staticcheck's SA1012 flags a literal nil
	b := fanouttest.New[int](t)
	w := fanouttest.Watch(t, b)
	assert.ErrorContains(t, b.ActionContext(nilCtx, 1), "nil context")
	_, err := b.ActionBatchContext(nilCtx, []int{1})
	assert.ErrorContains(t, err, "nil context")
	_, err = b.ActionSeq(nilCtx, 1)
	assert.ErrorContains(t, err, "nil context")
	assert.Zero(t, b.Stats().Accepted)
	_, err = w.Recv(nilCtx, make([]int, 1))
	assert.ErrorContains(t, err, "nil context")
	_, err = w.Next(nilCtx)
	assert.ErrorContains(t, err, "nil context")

	r, err := fanout.NewRecorder[int]()
	require.NoError(t, err)
	assert.ErrorContains(t, r.Flush(nilCtx), "nil context")
	assert.ErrorContains(t, r.Shutdown(nilCtx), "nil context")
	assert.NoError(t, r.Record(1), "the recorder still runs")
	require.NoError(t, r.Shutdown(context.Background()))

	c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[int]{})
	require.NoError(t, err)
	assert.ErrorContains(t, c.WriteOpen(nilCtx, fanout.Sweep[int]{Write: func(ctx context.Context, v int) (int, error) { return v, nil }}), "nil context")
}
