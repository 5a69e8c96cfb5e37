# Every directory holding a go.mod is a module; the targets loop over all of
# them, so modules added later are included without editing this file.
MODULES := $(patsubst %/go.mod,%,$(shell find . -name go.mod -not -path '*/testdata/*' -not -path './.git/*' | sort))
GO ?= go
# The build tag of the tests that need a real kube-apiserver and etcd
# (k8s/apiservertest); only `make test` sets it.
E2E_TAG := e2e
# The build tag of the core's invariant checks and protocol tests (DESIGN.md).
CHECK_TAG := fanoutcheck
# go vet, the tests, staticcheck and the release test's consumer builds
# (internal/release) all compile with the race detector and -trimpath, so
# that every module's dependencies are compiled once, in one configuration,
# and each step reuses what the one before it compiled: from empty caches,
# make test took 56 minutes with a second configuration (the checks
# without the race detector) and 39 without (CONTRIBUTING.md). -trimpath
# lets the consumer builds, which have a module cache of their own, reuse
# them too.
TEST_GOFLAGS := $(strip $(GOFLAGS) -trimpath)
# staticcheck is installed once into .tools, which git ignores, built
# without the race detector (go run would build it with GOFLAGS, -race
# included); it loads the packages it checks with TEST_GOFLAGS and -race,
# reusing the compiled dependencies.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(CURDIR)/.tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck
# Modules `make quick` tests at once.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: test quick check fmt-check tidy-check vet staticcheck race invariants histories e2e-binaries bench bench-full bench-readme bench-e2e release-check

## test: everything CI runs (.ci/run): gofmt, go mod tidy, go vet, the e2e binaries, go test -race of every
## module including the end-to-end tests (-tags e2e) and the release test, the core's tests once more with
## its invariant checks (make invariants), then staticcheck.
## staticcheck comes last so that a lint finding does not hide a test failure. Each step prints its start
## time (UTC) after "==", so that a slow run says where its time went.
test: fmt-check tidy-check vet e2e-binaries race invariants staticcheck
	@echo "== $$(date -u +%T) make test: done"

## quick: the edit-test loop: go test -race -short of every module, without the e2e tests and their binaries,
## the modules side by side (one job per core; each module's output is printed when it is done). -short skips
## the release test and shortens the randomized parity runs; make test runs both in full. Test results are
## cached as usual; add GOTESTFLAGS=-count=1 to rerun everything.
quick:
	@$(MAKE) --no-print-directory -j$(JOBS) -Otarget $(addprefix quick-module/,$(MODULES))

quick-module/%:
	@echo "== $$(date -u +%T) test -race -short $*"; cd $* && GOFLAGS="$(TEST_GOFLAGS)" $(GO) test -race -short -timeout 20m $(GOTESTFLAGS) ./...

## check: the static checks of `make test`, without tests: gofmt, go mod tidy, go vet, staticcheck.
check: fmt-check tidy-check vet staticcheck

## e2e-binaries: build kube-apiserver and etcd, and VictoriaLogs (the real server of Loki's push API for
## the exporter's Loki sink), from the Go module proxy into the user cache dir (the first time about
## 7 minutes, and a minute more for VictoriaLogs, with throwaway build caches; nothing when cached), and
## unpack Debian's rsyslog there (the syslog daemon of the exporter's syslog sink tests; seconds), and
## install the AWS emulators of the exporter's AWS receivers (fauxqs, kinesalite) from npm (10 to 30 s), and
## unpack Debian's prometheus (the dashboards' and alerting rules' tests) and chromium (the live view's
## browser test, with the libraries it needs that the machine lacks; about a minute) there.
## The tests would install them too (k8s/apiservertest, exporter/internal/vlogstest,
## exporter/internal/rsyslogtest, exporter/internal/awstest, observability/internal/promtest and
## observability/internal/chromiumtest embed the same scripts); doing it first keeps them out of go test's
## timeout.
e2e-binaries:
	@set -e; for s in k8s/apiservertest/binaries.sh exporter/internal/vlogstest/binary.sh \
		exporter/internal/rsyslogtest/binary.sh exporter/internal/awstest/emulators.sh \
		observability/internal/promtest/binary.sh observability/internal/chromiumtest/binary.sh; do \
		echo "== $$(date -u +%T) install $$s"; bash $$s >/dev/null; done

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

tidy-check:
	@set -e; for m in $(MODULES); do echo "== $$(date -u +%T) tidy $$m"; (cd $$m && $(GO) mod tidy -diff); done

## vet: every module as the tests build it (-race), e2e files included; then the core's fanoutcheck build
## without the race detector, which also vets the files that build only without it (head_release_amd64.go).
vet:
	@set -e; for m in $(MODULES); do echo "== $$(date -u +%T) vet -race $$m"; (cd $$m && GOFLAGS="$(TEST_GOFLAGS)" $(GO) vet -race -tags $(E2E_TAG) ./...); done
	@echo "== $$(date -u +%T) vet -tags $(CHECK_TAG) ."; GOFLAGS="$(TEST_GOFLAGS)" $(GO) vet -tags $(CHECK_TAG) .

## staticcheck: every module as the tests build it (-race), e2e files included, then the core's fanoutcheck
## build without the race detector (as vet); reports every module before failing.
staticcheck: $(STATICCHECK)
	@fail=0; for m in $(MODULES); do echo "== $$(date -u +%T) staticcheck $$m"; \
	(cd $$m && GOFLAGS="$(TEST_GOFLAGS) -race" $(STATICCHECK) -tags $(E2E_TAG) ./...) || fail=1; done; \
	echo "== $$(date -u +%T) staticcheck -tags $(CHECK_TAG) ."; GOFLAGS="$(TEST_GOFLAGS)" $(STATICCHECK) -tags $(CHECK_TAG) . || fail=1; \
	exit $$fail

$(STATICCHECK):
	@echo "== $$(date -u +%T) install staticcheck $(STATICCHECK_VERSION)"
	@GOBIN="$(dir $(STATICCHECK))" GOFLAGS="$(TEST_GOFLAGS)" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

race:
	@set -e; for m in $(MODULES); do echo "== $$(date -u +%T) test -race -tags $(E2E_TAG) $$m"; \
	(cd $$m && GOFLAGS="$(TEST_GOFLAGS)" $(GO) test -race -tags $(E2E_TAG) -count=1 -timeout 30m ./...); done

## invariants: the core's tests built with the fanoutcheck tag (DESIGN.md, section 9): the lock order and
## the engine's invariants checked at every release of the broadcaster's lock, and the deterministic
## protocol tests (protocol_test.go), which force each wake-up obligation's interleaving. About 3 minutes.
## Then the same without the race detector, and the core's tests as they ship (no tag, no race detector):
## on amd64 the fast path's release is then the plain store of head_release_amd64.s, which a -race build
## replaces with an atomic one. Seconds each.
invariants:
	@echo "== $$(date -u +%T) test -race -tags $(CHECK_TAG) ."; GOFLAGS="$(TEST_GOFLAGS)" $(GO) test -race -tags $(CHECK_TAG) -count=1 -timeout 30m .
	@echo "== $$(date -u +%T) test -tags $(CHECK_TAG) . (no race detector)"; GOFLAGS="$(TEST_GOFLAGS)" $(GO) test -tags $(CHECK_TAG) -count=1 -timeout 30m .
	@echo "== $$(date -u +%T) test . (no tag, no race detector: the build that ships)"; GOFLAGS="$(TEST_GOFLAGS)" $(GO) test -count=1 -timeout 30m .

## bench: the main command: the headline of the comparison harness bench/cmd/fanout-bench (-headline, about
## 3 minutes on 2 cores with warm caches): one producer at 1, 10, 100 and 1,000 watchers, fanout against k8s
## watch.Broadcaster, raw channels, the limit ring and the peers, the targets those cases decide, and how to
## run everything (make bench-full). The report goes to stdout; bench.json (JSON Lines) and the chart
## bench.svg go to bench/out/, which git ignores. Exit status 0 when the run completed; BENCHFLAGS=-strict
## makes a missed target fail.
bench:
	cd bench && $(GO) run ./cmd/fanout-bench -headline -json out/bench.json -svg out/bench.svg $(BENCHFLAGS)

## bench-full: everything the harness measures, with its defaults (about 32 minutes on 2 cores): 1 and 4
## producers, every strategy and read path, batches, topics, filters, latency, idle memory and CPU, replay,
## k8s/record and k8s/events against client-go, the NATS group, and every target. Same files and exit status
## as make bench.
bench-full:
	cd bench && $(GO) run ./cmd/fanout-bench -json out/bench.json -svg out/bench.svg $(BENCHFLAGS)

## bench-e2e: the last mile (issue 36), against a real kube-apiserver and etcd (built once by e2e-binaries): a
## burst of 1,000 events per API from fanout's k8s/record and k8s/events (1, 8, 16, 32 writers) and client-go's
## tools/record and tools/events until every event is on the server; then fanout-eventer's webhook lag (p50, p99)
## on 15,000 occurrences. About 4 minutes on 2 cores; the burst figures also go to bench/out/e2e.json.
bench-e2e: e2e-binaries
	cd bench && $(GO) run ./cmd/fanout-e2e-bench -json out/e2e.json
	cd exporter && $(GO) run ./cmd/fanout-eventer-bench -lag 15000

## bench-readme: a full run like `make bench-full` that also redraws the README's chart, the tracked
## bench/bench.svg, and writes the README's tables from the same run, in Markdown, to bench/out/tables.md
## (bench/cmd/fanout-tables). Deliberate: copy them into README.md from that file.
bench-readme:
	cd bench && $(GO) run ./cmd/fanout-bench -json out/bench.json -svg bench.svg $(BENCHFLAGS)
	cd bench && $(GO) run ./cmd/fanout-tables out/bench.json > out/tables.md && echo "README tables written to bench/out/tables.md"

## histories: the long run of the root module's concurrent histories checked against their model with
## porcupine (history_test.go; `go test` checks 100 of them): the fuzz target FuzzHistories under -race for
## HISTORYTIME (default 10m), each input a seed. A failure gives the history and the path of its visualization.
HISTORYTIME ?= 10m
histories:
	$(GO) test -race -run '^$$' -fuzz '^FuzzHistories$$' -fuzztime $(HISTORYTIME) .

## release-check: check that every module requires its siblings at the version in VERSION (with a replace
## for development), and print the tags that release them. See RELEASING.md.
release-check:
	@cd internal/release && $(GO) run ./cmd/release-check -root ../..
