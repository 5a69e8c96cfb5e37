package awstest

import (
	"bufio"
	"embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout/k8s/apiservertest"
)

// Version names the install of the emulators: the cache directory is
// aws-emulators-<Version>. It must match the default of emulators.sh, and
// change with npm/package-lock.json.
const Version = "fauxqs-1.9.2-kinesalite-3.3.3"

// ReadyTimeout bounds how long an emulator may take to listen.
const ReadyTimeout = 60 * time.Second

// installScript is emulators.sh, which `make e2e-binaries` runs too.
//
//go:embed emulators.sh
var installScript string

// npmFiles are the package files that pin the emulators' versions, handed
// to the script in a directory of their own.
//
//go:embed npm/package.json npm/package-lock.json
var npmFiles embed.FS

var (
	dirMu sync.Mutex
	dir   string
)

// Dir returns the directory the emulators are installed in,
// os.UserCacheDir()/fanout-e2e/aws-emulators-<Version>, installing them
// first when they are missing (emulators.sh, embedded, under an flock, as
// [apiservertest.CachedBinaries] does for kube-apiserver).
func Dir() (string, error) {
	dirMu.Lock()
	defer dirMu.Unlock()
	if dir != "" {
		return dir, nil
	}
	npmDir, err := os.MkdirTemp("", "awstest-npm")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(npmDir)
	for _, name := range []string{"package.json", "package-lock.json"} {
		b, err := npmFiles.ReadFile("npm/" + name)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(npmDir, name), b, 0o644); err != nil {
			return "", err
		}
	}
	bins := filepath.Join("aws-emulators-"+Version, "node_modules", ".bin")
	paths, err := apiservertest.CachedBinaries([]string{filepath.Join(bins, "fauxqs"), filepath.Join(bins, "kinesalite")},
		"awstest: emulators.sh (embedded)", installScript,
		"FANOUT_E2E_AWS_EMULATORS_VERSION="+Version, "FANOUT_E2E_AWS_NPM_DIR="+npmDir)
	if err != nil {
		return "", err
	}
	dir = filepath.Dir(filepath.Dir(filepath.Dir(paths[0])))
	return dir, nil
}

// fauxqsMain starts fauxqs on a free loopback port (its command listens on
// every interface) and prints its address.
const fauxqsMain = `import { buildApp } from "fauxqs";
const app = buildApp({ logger: false });
const addr = await app.listen({ port: 0, host: "127.0.0.1" });
console.log("listening " + addr);
`

// kinesaliteMain starts kinesalite in memory on a free loopback port, its
// streams active at once, and prints its address.
const kinesaliteMain = `const server = require("kinesalite")({ createStreamMs: 0, deleteStreamMs: 0, updateStreamMs: 0 });
server.listen(0, "127.0.0.1", () => console.log("listening http://127.0.0.1:" + server.address().port));
`

// Emulator is a running emulator process.
type Emulator struct {
	// URL is its endpoint, http://127.0.0.1:PORT.
	URL string

	name string
	cmd  *exec.Cmd
	log  string        // the file holding its standard error
	done chan struct{} // closed once the process has exited
}

// StartFauxqs starts fauxqs (SQS and SNS), installing it first if needed
// (see [Dir]); t's cleanup kills it.
func StartFauxqs(t testing.TB) *Emulator {
	t.Helper()
	return start(t, "fauxqs", "--input-type=module", fauxqsMain)
}

// StartKinesalite starts kinesalite (Kinesis), in memory, installing it
// first if needed (see [Dir]); t's cleanup kills it.
func StartKinesalite(t testing.TB) *Emulator {
	t.Helper()
	return start(t, "kinesalite", "--input-type=commonjs", kinesaliteMain)
}

// start runs node with the program main in the install directory, so that
// it imports the emulator from there, and waits for its address.
func start(t testing.TB, name, inputType, main string) *Emulator {
	t.Helper()
	d, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	e := &Emulator{name: name, log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	addr, err := e.run(d, inputType, main)
	if err != nil {
		t.Fatal(err)
	}
	e.URL = addr
	t.Cleanup(func() {
		e.kill()
		if t.Failed() {
			t.Logf("%s's standard error (%s):\n%s", name, e.log, e.logTail())
		}
	})
	return e
}

// run starts the process and returns the address it prints.
func (e *Emulator) run(dir, inputType, main string) (string, error) {
	logFile, err := os.Create(e.log)
	if err != nil {
		return "", err
	}
	defer logFile.Close() // the child has its own descriptor
	e.cmd = exec.Command("node", inputType, "-e", main)
	e.cmd.Dir = dir
	e.cmd.Stderr = logFile
	e.cmd.SysProcAttr = sysProcAttr()
	out, err := e.cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := e.cmd.Start(); err != nil {
		return "", fmt.Errorf("awstest: start %s: %w", e.name, err)
	}
	addr := make(chan string, 1)
	go e.read(out, addr) // ends when the process exits
	t := time.NewTimer(ReadyTimeout)
	defer t.Stop()
	select {
	case a := <-addr:
		return a, nil
	case <-e.done:
		return "", fmt.Errorf("awstest: %s exited before listening: %v\n%s", e.name, e.cmd.ProcessState, e.logTail())
	case <-t.C:
		e.kill()
		return "", fmt.Errorf("awstest: %s not listening after %v\n%s", e.name, ReadyTimeout, e.logTail())
	}
}

// read hands the address the process prints to addr, reads its output to
// the end, and waits for it to exit.
func (e *Emulator) read(out io.Reader, addr chan<- string) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
			select {
			case addr <- strings.TrimSpace(a):
			default:
			}
		}
	}
	_, _ = io.Copy(io.Discard, out)
	_ = e.cmd.Wait()
	close(e.done)
}

// kill kills the process and waits for it to exit.
func (e *Emulator) kill() {
	if e.cmd.Process != nil {
		_ = e.cmd.Process.Kill()
	}
	<-e.done
}

// logTail returns the end of the process's standard error.
func (e *Emulator) logTail() string {
	b, err := os.ReadFile(e.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}
