#!/usr/bin/env bash
# binary.sh installs rsyslogd, Debian's package rsyslog, into the user cache
# directory without touching the system, for the tests of the exporter's
# syslog sink against a real syslog daemon (package
# github.com/fanout-go/fanout/exporter/internal/rsyslogtest, which embeds
# this file and runs it when the daemon is missing; `make e2e-binaries` runs
# it too).
#
# The packages (rsyslog and the libraries it needs that a minimal Debian
# lacks: libestr0, libfastjson4, liblognorm5; 0.8 MB in all) are fetched
# with `apt-get download` and unpacked with `dpkg -x`: nothing is installed,
# no daemon is started, /etc is not touched. When apt has no package lists
# yet (a fresh machine), the script runs `apt-get update` once, which needs
# root.
#
# Layout (the one rsyslogtest.Binary reads):
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/fanout-e2e/rsyslog/rsyslogd
#
# rsyslogd there is a wrapper that runs the unpacked daemon with its
# libraries and modules (LD_LIBRARY_PATH, -M); root/ beside it holds the
# unpacked packages and version the package version. The last line printed
# on stdout is the fanout-e2e cache directory; logs go to stderr.
#
# The script is idempotent (an installed daemon is reused), safe to run
# concurrently (an flock on fanout-e2e/.rsyslog.lock serialises installers)
# and installs atomically (the directory is built aside, checked with -v,
# then renamed into place).
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
dest="$cache_root/rsyslog"
bin="$dest/rsyslogd"
packages=(rsyslog libestr0 libfastjson4 liblognorm5)

log() { echo "e2e-binaries: $*" >&2; }

done_print() {
	log "rsyslogd: $bin ($(cat "$dest/version" 2>/dev/null || echo unknown))"
	echo "$cache_root"
}

# Fast path: nothing to do, no lock needed (the install is an atomic rename).
if [[ -x "$bin" ]]; then
	done_print
	exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.rsyslog.lock"
if ! flock -n 9; then
	log "waiting for another install to finish (lock $cache_root/.rsyslog.lock)"
	flock 9
fi
if [[ -x "$bin" ]]; then
	done_print
	exit 0
fi

for tool in apt-get dpkg; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		log "$tool not found: the syslog tests need Debian's rsyslog package (apt-get download, dpkg -x)"
		exit 1
	fi
done

tmp="$(mktemp -d "$cache_root/.rsyslog.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/debs" "$tmp/out/root"

download() { (cd "$tmp/debs" && apt-get download -q -o APT::Sandbox::User=root "${packages[@]}" >&2); }
if ! download; then
	if [[ "$(id -u)" != 0 ]]; then
		log "apt-get download failed; as root, run apt-get update and try again"
		exit 1
	fi
	log "apt-get download failed: updating the package lists (apt-get update) and trying again"
	apt-get update -q >&2
	download
fi
for deb in "$tmp"/debs/*.deb; do
	dpkg -x "$deb" "$tmp/out/root"
done

# The multiarch directories (usr/lib/x86_64-linux-gnu, ...), found rather
# than assumed, relative to the install directory.
lib_dir="$(dirname "$(find "$tmp/out/root" -name 'libestr.so.0*' | head -n 1)")"
mod_dir="$(dirname "$(find "$tmp/out/root" -path '*/rsyslog/imtcp.so' | head -n 1)")"
if [[ ! -x "$tmp/out/root/usr/sbin/rsyslogd" || "$lib_dir" == . || "$mod_dir" == . ]]; then
	log "the unpacked packages lack rsyslogd, libestr or rsyslog's modules"
	exit 1
fi
lib_dir="${lib_dir#"$tmp/out/"}"
mod_dir="${mod_dir#"$tmp/out/"}"
cat >"$tmp/out/rsyslogd" <<WRAPPER
#!/bin/sh
# Runs the rsyslogd unpacked beside this file (see binary.sh in
# exporter/internal/rsyslogtest) with its libraries and modules.
here="\$(dirname "\$(readlink -f "\$0")")"
LD_LIBRARY_PATH="\$here/$lib_dir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/root/usr/sbin/rsyslogd" -M "\$here/$mod_dir" "\$@"
WRAPPER
chmod 0755 "$tmp/out/rsyslogd"
dpkg-deb -f "$(ls "$tmp"/debs/rsyslog_*.deb)" Version >"$tmp/out/version"

if ! out="$("$tmp/out/rsyslogd" -v 2>&1)"; then
	log "rsyslogd -v failed: $out"
	exit 1
fi
log "unpacked $(head -n 1 <<<"$out")"
rm -rf "$dest"
mv "$tmp/out" "$dest"
done_print
