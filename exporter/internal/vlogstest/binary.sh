#!/usr/bin/env bash
# binary.sh builds VictoriaLogs (victoria-logs, Apache-2.0) from source
# through the Go module proxy and caches it for the tests of the exporter's
# Loki sink against a real server of Loki's push API (package
# github.com/fanout-go/fanout/exporter/internal/vlogstest, which embeds this
# file and runs it when the binary is missing; `make e2e-binaries` runs it
# too).
#
# Layout (the one vlogstest.Binary reads):
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/fanout-e2e/victoria-logs-<version>/victoria-logs
#
# The last line printed on stdout is the fanout-e2e cache directory that
# holds the version directory; build logs go to stderr.
#
# The script is idempotent (a binary already present is reused), safe to run
# concurrently (an flock on fanout-e2e/.victoria-logs.lock serialises
# builders; kube-apiserver's and etcd's builds, binaries.sh in
# k8s/apiservertest, hold another lock) and installs atomically (the binary is
# built into a temporary directory inside its final directory, checked with
# -version, then renamed into place).
#
# The build (20 to 30 s on 2 cores) uses a throwaway Go build cache in a
# scratch directory that is removed at the end: its ~165 MB serve nothing
# else. Modules are downloaded into the usual module cache (GOMODCACHE):
# 232 MB, about 40 s more when they are not there yet.
#
# Environment:
#   FANOUT_E2E_VLOGS_VERSION  VictoriaLogs version (default v1.52.1)
#   GO                        go command to use (default: go on PATH)
set -euo pipefail

version="${FANOUT_E2E_VLOGS_VERSION:-v1.52.1}"

cache_base="${XDG_CACHE_HOME:-}"
if [[ -z "$cache_base" ]]; then
	if [[ -z "${HOME:-}" ]]; then
		echo "e2e-binaries: neither XDG_CACHE_HOME nor HOME is set" >&2
		exit 1
	fi
	cache_base="$HOME/.cache"
fi
cache_root="$cache_base/fanout-e2e"
bin_dir="$cache_root/victoria-logs-$version"
bin="$bin_dir/victoria-logs"

log() { echo "e2e-binaries: $*" >&2; }

done_print() {
	log "victoria-logs: $bin"
	echo "$cache_root"
}

# Fast path: nothing to do, no lock needed (the install is an atomic rename).
if [[ -x "$bin" ]]; then
	done_print
	exit 0
fi

mkdir -p "$bin_dir"
exec 9>"$cache_root/.victoria-logs.lock"
if ! flock -n 9; then
	log "waiting for another build to finish (lock $cache_root/.victoria-logs.lock)"
	flock 9
fi

# Another process may have finished the job while we waited.
if [[ -x "$bin" ]]; then
	done_print
	exit 0
fi

GO="${GO:-}"
if [[ -z "$GO" ]]; then
	if command -v go >/dev/null 2>&1; then
		GO=go
	elif [[ -x /usr/local/go/bin/go ]]; then
		GO=/usr/local/go/bin/go
	else
		log "no go command found (set GO or PATH)"
		exit 1
	fi
fi

# `go install pkg@version` builds outside any module or workspace. Keep the
# caller's GOFLAGS (e.g. -buildvcs=false) but drop any -mod setting, which
# go install with a version refuses.
export GOWORK=off
goflags=""
for f in $("$GO" env GOFLAGS); do
	case "$f" in
	-mod=* | --mod=*) ;;
	*) goflags="$goflags $f" ;;
	esac
done
export GOFLAGS="${goflags# }"
export CGO_ENABLED=0
unset GOOS GOARCH

scratch="$(mktemp -d "${TMPDIR:-/tmp}/fanout-e2e-vlogs.XXXXXX")"
# Needed once, reused by nothing: removed with the scratch directory.
export GOCACHE="$scratch/go-build"
# In the final directory, so that the install is a rename on one file system.
tmp_dir="$(mktemp -d "$bin_dir/.build.XXXXXX")"
cleanup() { rm -rf "$scratch" "$tmp_dir"; }
trap cleanup EXIT

start=$SECONDS
log "building victoria-logs $version (GOFLAGS=$GOFLAGS)"
# VictoriaLogs's Makefile sets the version the binary prints with -version.
GOBIN="$tmp_dir" "$GO" install -trimpath \
	-ldflags="-s -w -X github.com/VictoriaMetrics/VictoriaMetrics/lib/buildinfo.Version=victoria-logs-$version" \
	"github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs@$version"

if ! out="$("$tmp_dir/victoria-logs" -version 2>&1)"; then
	log "victoria-logs -version failed: $out"
	exit 1
fi
if [[ "$out" != "victoria-logs-$version" ]]; then
	log "victoria-logs -version printed $out, want victoria-logs-$version"
	exit 1
fi
chmod 0755 "$tmp_dir/victoria-logs"
mv -f "$tmp_dir/victoria-logs" "$bin"
log "installed $bin in $((SECONDS - start))s"
done_print
