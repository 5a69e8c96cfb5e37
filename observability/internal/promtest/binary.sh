#!/usr/bin/env bash
# binary.sh installs Prometheus, Debian's package prometheus, into the user
# cache directory without touching the system, for the tests of the
# repository's Grafana dashboards and alerting rules against a real
# Prometheus (package
# github.com/fanout-go/fanout/observability/internal/promtest, which embeds
# this file and runs it when the binaries are missing; `make e2e-binaries`
# runs it too).
#
# The package is a Go program with no library beyond libc: it is fetched
# with `apt-get download` and unpacked with `dpkg -x` (19 MB): nothing is
# installed, no daemon is started, /etc is not touched. When apt has no
# package lists yet (a fresh machine), the script runs `apt-get update`
# once, which needs root.
#
# Layout (the one promtest.Binaries reads):
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/fanout-e2e/prometheus/prometheus
#   ${XDG_CACHE_HOME:-$HOME/.cache}/fanout-e2e/prometheus/promtool
#
# version beside them holds the package version. The last line printed on
# stdout is the fanout-e2e cache directory; logs go to stderr.
#
# The script is idempotent (installed binaries are reused), safe to run
# concurrently (an flock on fanout-e2e/.prometheus.lock serialises
# installers) and installs atomically (the directory is built aside,
# checked with --version, then renamed into place).
set -euo pipefail

cache_base="${XDG_CACHE_HOME:-}"
if [[ -z "$cache_base" ]]; then
	if [[ -z "${HOME:-}" ]]; then
		echo "e2e-binaries: neither XDG_CACHE_HOME nor HOME is set" >&2
		exit 1
	fi
	cache_base="$HOME/.cache"
fi
cache_root="$cache_base/fanout-e2e"
dest="$cache_root/prometheus"

log() { echo "e2e-binaries: $*" >&2; }

installed() { [[ -x "$dest/prometheus" && -x "$dest/promtool" ]]; }

done_print() {
	log "prometheus: $dest/prometheus ($(cat "$dest/version" 2>/dev/null || echo unknown))"
	echo "$cache_root"
}

if installed; then
	done_print
	exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.prometheus.lock"
if ! flock -n 9; then
	log "waiting for another install to finish (lock $cache_root/.prometheus.lock)"
	flock 9
fi
if installed; then
	done_print
	exit 0
fi

for tool in apt-get dpkg dpkg-deb; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		log "$tool not found: the dashboard tests need Debian's prometheus package (apt-get download, dpkg -x)"
		exit 1
	fi
done

tmp="$(mktemp -d "$cache_root/.prometheus.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/debs" "$tmp/root" "$tmp/out"

download() { (cd "$tmp/debs" && apt-get download -q -o APT::Sandbox::User=root prometheus >&2); }
if ! download; then
	if [[ "$(id -u)" != 0 ]]; then
		log "apt-get download failed; as root, run apt-get update and try again"
		exit 1
	fi
	log "apt-get download failed: updating the package lists (apt-get update) and trying again"
	apt-get update -q >&2
	download
fi
deb="$(ls "$tmp"/debs/prometheus_*.deb)"
dpkg -x "$deb" "$tmp/root"
for b in prometheus promtool; do
	if [[ ! -x "$tmp/root/usr/bin/$b" ]]; then
		log "the unpacked package lacks usr/bin/$b"
		exit 1
	fi
	mv "$tmp/root/usr/bin/$b" "$tmp/out/$b"
done
dpkg-deb -f "$deb" Version >"$tmp/out/version"

if ! out="$("$tmp/out/prometheus" --version 2>&1)"; then
	log "prometheus --version failed: $out"
	exit 1
fi
log "unpacked $(head -n 1 <<<"$out")"
rm -rf "$dest"
mv "$tmp/out" "$dest"
done_print
