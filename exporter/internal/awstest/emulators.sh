#!/usr/bin/env bash
# emulators.sh installs the AWS emulators that the exporter's AWS receivers
# are tested against, from the npm registry, and caches them (package
# github.com/fanout-go/fanout/exporter/internal/awstest, which embeds this
# file and runs it when they are missing; `make e2e-binaries` runs it too):
#
#   fauxqs      SQS (AWS JSON 1.0) and SNS (AWS query), MIT
#   kinesalite  Kinesis (AWS JSON 1.1), MIT
#
# The versions of both, and of everything they depend on, are pinned by
# npm/package.json and npm/package-lock.json beside this file (`npm ci`).
#
# Layout (the one awstest reads):
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/fanout-e2e/aws-emulators-<version>/node_modules/...
#
# The last line printed on stdout is the fanout-e2e cache directory that
# holds the version directory; install logs go to stderr.
#
# The script is idempotent (an install already present is reused), safe to
# run concurrently (an flock on fanout-e2e/.aws-emulators.lock serialises
# installers) and installs atomically (into a temporary directory beside the
# final one, checked, then renamed into place). It takes 10 to 30 s and
# 60 MB; it needs node (20 or later) and npm on PATH.
#
# Environment:
#   FANOUT_E2E_AWS_EMULATORS_VERSION  the install's version (default below;
#                                     change it with the npm files)
#   FANOUT_E2E_AWS_NPM_DIR            the directory holding package.json and
#                                     package-lock.json (default: npm/ beside
#                                     this file; awstest passes a copy)
set -euo pipefail

version="${FANOUT_E2E_AWS_EMULATORS_VERSION:-fauxqs-1.9.2-kinesalite-3.3.3}"

npm_dir="${FANOUT_E2E_AWS_NPM_DIR:-}"
if [[ -z "$npm_dir" ]]; then
	npm_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/npm"
fi

cache_base="${XDG_CACHE_HOME:-}"
if [[ -z "$cache_base" ]]; then
	if [[ -z "${HOME:-}" ]]; then
		echo "e2e-binaries: neither XDG_CACHE_HOME nor HOME is set" >&2
		exit 1
	fi
	cache_base="$HOME/.cache"
fi
cache_root="$cache_base/fanout-e2e"
dir="$cache_root/aws-emulators-$version"
# The files awstest checks for (npm links them executable).
fauxqs_bin="$dir/node_modules/.bin/fauxqs"
kinesalite_bin="$dir/node_modules/.bin/kinesalite"

log() { echo "e2e-binaries: $*" >&2; }

have_all() { [[ -x "$fauxqs_bin" && -x "$kinesalite_bin" ]]; }

done_print() {
	log "aws emulators: $dir"
	echo "$cache_root"
}

# Fast path: nothing to do, no lock needed (the install is an atomic rename).
if have_all; then
	done_print
	exit 0
fi

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		log "$tool not found on PATH: the AWS emulators are npm packages"
		exit 1
	fi
done
for f in package.json package-lock.json; do
	if [[ ! -f "$npm_dir/$f" ]]; then
		log "$npm_dir/$f missing"
		exit 1
	fi
done

mkdir -p "$cache_root"
exec 9>"$cache_root/.aws-emulators.lock"
if ! flock -n 9; then
	log "waiting for another install to finish (lock $cache_root/.aws-emulators.lock)"
	flock 9
fi

# Another process may have finished the job while we waited.
if have_all; then
	done_print
	exit 0
fi

tmp_dir="$(mktemp -d "$cache_root/.aws-emulators.XXXXXX")"
cleanup() { rm -rf "$tmp_dir"; }
trap cleanup EXIT

start=$SECONDS
log "installing the AWS emulators $version with npm ci"
cp "$npm_dir/package.json" "$npm_dir/package-lock.json" "$tmp_dir/"
# --ignore-scripts: no package needs one (kinesalite's optional LevelDB
# store, which would compile a native module, is not used: it runs in
# memory).
(cd "$tmp_dir" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund >&2)

for b in fauxqs kinesalite; do
	if [[ ! -x "$tmp_dir/node_modules/.bin/$b" ]]; then
		log "npm ci did not install $b"
		exit 1
	fi
done
rm -rf "$dir"
mv "$tmp_dir" "$dir"
log "installed $dir in $((SECONDS - start))s"
done_print
