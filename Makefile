# Every directory holding a go.mod is a module; targets loop over all of them,
# so modules added later (k8s/, bench/) are included without editing this file.
MODULES := $(patsubst %/go.mod,%,$(shell find . -name go.mod -not -path '*/testdata/*' | sort))
GO ?= go

.PHONY: test check vet fmt-check tidy-check race bench e2e-binaries

## test: everything CI runs: gofmt, go vet, go mod tidy and go test -race, per module,
## including the Kubernetes adapter's end-to-end tests against a real kube-apiserver and etcd.
test: fmt-check tidy-check vet e2e-binaries race

## e2e-binaries: build kube-apiserver and etcd from the Go module proxy into the user cache dir
## (about 7 minutes the first time, nothing when cached). The e2e tests would build them too;
## doing it first keeps the build out of go test's timeout.
e2e-binaries:
	@bash k8s/apiservertest/binaries.sh >/dev/null

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

tidy-check:
	@set -e; for m in $(MODULES); do echo "== tidy $$m"; (cd $$m && $(GO) mod tidy -diff); done

vet:
	@set -e; for m in $(MODULES); do echo "== vet $$m"; (cd $$m && $(GO) vet ./...); done

race:
	@set -e; for m in $(MODULES); do echo "== test -race $$m"; (cd $$m && $(GO) test -race -count=1 -timeout 30m ./...); done

## bench: the main job: the comparison harness bench/cmd/fanout-bench with its defaults (1.5 to 2 minutes on
## 2 cores): fanout vs k8s watch.Broadcaster vs raw channels, a table with PASS/FAIL targets on stdout,
## bench.json (JSON Lines, one object per case) and the chart bench/bench.svg.
bench:
	cd bench && $(GO) run ./cmd/fanout-bench -json ../bench.json -svg bench.svg
