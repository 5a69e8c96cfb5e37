# Every directory holding a go.mod is a module; targets loop over all of them,
# so modules added later (k8s/, bench/) are included without editing this file.
MODULES := $(patsubst %/go.mod,%,$(shell find . -name go.mod -not -path '*/testdata/*' | sort))
GO ?= go

.PHONY: test check vet fmt-check tidy-check race bench

## test: everything CI runs: gofmt, go vet, go mod tidy and go test -race, per module.
test: fmt-check tidy-check vet race

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

tidy-check:
	@set -e; for m in $(MODULES); do echo "== tidy $$m"; (cd $$m && $(GO) mod tidy -diff); done

vet:
	@set -e; for m in $(MODULES); do echo "== vet $$m"; (cd $$m && $(GO) vet ./...); done

race:
	@set -e; for m in $(MODULES); do echo "== test -race $$m"; (cd $$m && $(GO) test -race -count=1 ./...); done

## bench: the main job: the comparison harness bench/cmd/fanout-bench with its defaults (1.5 to 2 minutes on
## 2 cores): fanout vs k8s watch.Broadcaster vs raw channels, a table with PASS/FAIL targets on stdout,
## bench.json (JSON Lines, one object per case) and the chart bench/bench.svg.
bench:
	cd bench && $(GO) run ./cmd/fanout-bench -json ../bench.json -svg bench.svg
