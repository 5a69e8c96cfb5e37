#!/usr/bin/env bash
# binary.sh installs Chromium, Debian's package chromium, into the user
# cache directory without touching the system, for the tests that load the
# live view (github.com/fanout-go/fanout/debug) in a real, headless browser
# (package github.com/fanout-go/fanout/observability/internal/chromiumtest,
# which embeds this file and runs it when the browser is missing;
# `make e2e-binaries` runs it too).
#
# The packages are chromium, chromium-common and the libraries (and a
# font) they need that this machine lacks: `apt-get -s install` lists
# them, `apt-get download` fetches them and `dpkg -x` unpacks them (about
# 100 MB on a machine with no desktop libraries): nothing is installed, no
# daemon is started, /etc is not touched. When apt has no package lists
# yet (a fresh machine), the script runs `apt-get update` once, which
# needs root.
#
# Layout (the one chromiumtest.Binary reads):
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/fanout-e2e/chromium/chromium
#
# chromium there is a wrapper that runs the unpacked browser with its
# libraries (LD_LIBRARY_PATH) and a font configuration of its own that
# adds the unpacked fonts to the system's; root/ beside it holds the
# unpacked packages and version the package version. The last line printed
# on stdout is the fanout-e2e cache directory; logs go to stderr.
#
# The script is idempotent (an installed browser is reused), safe to run
# concurrently (an flock on fanout-e2e/.chromium.lock serialises
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
dest="$cache_root/chromium"
bin="$dest/chromium"
wanted=(chromium fonts-dejavu-core)

log() { echo "e2e-binaries: $*" >&2; }

done_print() {
	log "chromium: $bin ($(cat "$dest/version" 2>/dev/null || echo unknown))"
	echo "$cache_root"
}

if [[ -x "$bin" ]]; then
	done_print
	exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.chromium.lock"
if ! flock -n 9; then
	log "waiting for another install to finish (lock $cache_root/.chromium.lock)"
	flock 9
fi
if [[ -x "$bin" ]]; then
	done_print
	exit 0
fi

for tool in apt-get dpkg dpkg-deb; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		log "$tool not found: the browser tests need Debian's chromium package (apt-get download, dpkg -x)"
		exit 1
	fi
done

tmp="$(mktemp -d "$cache_root/.chromium.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/debs" "$tmp/out/root"

# The packages to unpack: chromium's own, and what apt would install
# with them, which this machine lacks. A simulation needs no root and
# changes nothing.
packages() {
	{
		echo chromium
		echo chromium-common
		apt-get -s -q install --no-install-recommends "${wanted[@]}" 2>/dev/null | awk '$1 == "Inst" { print $2 }'
	} | sort -u
}
fetch() {
	# shellcheck disable=SC2046 # one package per word
	(cd "$tmp/debs" && apt-get download -q -o APT::Sandbox::User=root $(packages) >&2)
}
if ! fetch; then
	if [[ "$(id -u)" != 0 ]]; then
		log "apt-get could not list or download chromium's packages; as root, run apt-get update and try again"
		exit 1
	fi
	log "apt-get failed: updating the package lists (apt-get update) and trying again"
	apt-get update -q >&2
	rm -f "$tmp"/debs/*.deb
	fetch
fi
for deb in "$tmp"/debs/*.deb; do
	dpkg -x "$deb" "$tmp/out/root"
done
if [[ ! -x "$tmp/out/root/usr/lib/chromium/chromium" ]]; then
	log "the unpacked packages lack usr/lib/chromium/chromium"
	exit 1
fi

# The directories of the unpacked shared libraries, relative to the
# install directory, found rather than assumed (usr/lib/x86_64-linux-gnu,
# its subdirectories, ...).
lib_dirs="$(cd "$tmp/out" && find root -name '*.so*' -printf '%h\n' | sort -u | tr '\n' ':')"
# The fonts: the system's and the unpacked ones, by their paths once
# installed; fontconfig's cache goes beside them.
cat >"$tmp/out/fonts.conf" <<FONTS
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <dir>/usr/share/fonts</dir>
  <dir>$dest/root/usr/share/fonts</dir>
  <cachedir>$dest/fontcache</cachedir>
</fontconfig>
FONTS
cat >"$tmp/out/chromium" <<WRAPPER
#!/bin/sh
# Runs the chromium unpacked beside this file (see binary.sh in
# observability/internal/chromiumtest) with its libraries and fonts.
here="\$(dirname "\$(readlink -f "\$0")")"
libs=""
for d in \$(echo "$lib_dirs" | tr ':' ' '); do libs="\$libs\$here/\$d:"; done
export LD_LIBRARY_PATH="\$libs\${LD_LIBRARY_PATH:-}"
export FONTCONFIG_FILE="\$here/fonts.conf"
exec "\$here/root/usr/lib/chromium/chromium" "\$@"
WRAPPER
chmod 0755 "$tmp/out/chromium"
dpkg-deb -f "$(ls "$tmp"/debs/chromium_*.deb)" Version >"$tmp/out/version"

if ! out="$("$tmp/out/chromium" --version 2>&1)"; then
	log "chromium --version failed: $out"
	exit 1
fi
log "unpacked $(head -n 1 <<<"$out")"
rm -rf "$dest"
mv "$tmp/out" "$dest"
done_print
