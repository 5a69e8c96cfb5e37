#!/usr/bin/env bash
# binaries.sh builds kube-apiserver and etcd from source through the Go
# module proxy and caches them for the end-to-end tests (package
# github.com/fanout-go/fanout/k8s/apiservertest, which embeds this file and
# runs it when the binaries are missing; `make e2e-binaries` runs it too).
#
# Layout (the one apiservertest.Binaries reads):
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/fanout-e2e/kube-apiserver-<version>/kube-apiserver
#   ${XDG_CACHE_HOME:-$HOME/.cache}/fanout-e2e/etcd-<version>/etcd
#
# The last line printed on stdout is the fanout-e2e cache directory that holds
# both version directories; build logs go to stderr.
#
# The script is idempotent (binaries already present are reused), safe to run
# concurrently (an flock on fanout-e2e/.lock serialises builders) and installs
# atomically (a binary is built to a temporary file in its final directory,
# checked with --version, then renamed into place).
#
# The build uses a throwaway Go build cache in a scratch directory that is
# removed at the end: compiling kube-apiserver and etcd fills about 5 GB of
# build cache that nothing else reuses. Modules are downloaded into the
# usual module cache (GOMODCACHE).
#
# Environment:
#   FANOUT_E2E_KUBE_VERSION  kube-apiserver version (default v1.34.4)
#   FANOUT_E2E_ETCD_VERSION  etcd version (default v3.6.4)
#   GO                       go command to use (default: go on PATH)
set -euo pipefail

kube_version="${FANOUT_E2E_KUBE_VERSION:-v1.34.4}"
etcd_version="${FANOUT_E2E_ETCD_VERSION:-v3.6.4}"

cache_base="${XDG_CACHE_HOME:-}"
if [[ -z "$cache_base" ]]; then
	if [[ -z "${HOME:-}" ]]; then
		echo "e2e-binaries: neither XDG_CACHE_HOME nor HOME is set" >&2
		exit 1
	fi
	cache_base="$HOME/.cache"
fi
cache_root="$cache_base/fanout-e2e"
apiserver_dir="$cache_root/kube-apiserver-$kube_version"
etcd_dir="$cache_root/etcd-$etcd_version"
apiserver_bin="$apiserver_dir/kube-apiserver"
etcd_bin="$etcd_dir/etcd"

log() { echo "e2e-binaries: $*" >&2; }

have_all() { [[ -x "$apiserver_bin" && -x "$etcd_bin" ]]; }

done_print() {
	log "kube-apiserver: $apiserver_bin"
	log "etcd: $etcd_bin"
	echo "$cache_root"
}

# Fast path: nothing to do, no lock needed (installs are atomic renames).
if have_all; then
	done_print
	exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
if ! flock -n 9; then
	log "waiting for another build to finish (lock $cache_root/.lock)"
	flock 9
fi

# Another process may have finished the job while we waited.
if have_all; then
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

# Build outside any workspace and allow go.mod updates in the scratch modules.
# Keep the caller's GOFLAGS (e.g. -buildvcs=false) but drop any -mod setting.
export GOWORK=off
goflags=""
for f in $("$GO" env GOFLAGS); do
	case "$f" in
	-mod=* | --mod=*) ;;
	*) goflags="$goflags $f" ;;
	esac
done
export GOFLAGS="${goflags# } -mod=mod"
export GOFLAGS="${GOFLAGS# }"
export CGO_ENABLED=0
unset GOOS GOARCH

scratch="$(mktemp -d "${TMPDIR:-/tmp}/fanout-e2e-build.XXXXXX")"
# Needed once, reused by nothing: removed with the scratch directory.
export GOCACHE="$scratch/go-build"
tmp_bins=()
cleanup() {
	rm -rf "$scratch"
	if ((${#tmp_bins[@]})); then
		rm -f "${tmp_bins[@]}"
	fi
}
trap cleanup EXIT

# install_checked TMP FINAL PATTERN: runs TMP --version, checks its output
# matches PATTERN, then renames TMP to FINAL.
install_checked() {
	local tmp="$1" final="$2" pattern="$3" out
	if ! out="$("$tmp" --version 2>&1)"; then
		log "$tmp --version failed: $out"
		return 1
	fi
	if ! grep -q -- "$pattern" <<<"$out"; then
		log "$tmp --version printed unexpected output (want $pattern): $out"
		return 1
	fi
	log "verified: $(head -n1 <<<"$out")"
	chmod 0755 "$tmp"
	mv -f "$tmp" "$final"
	log "installed $final"
}

build_etcd() {
	local mod="$scratch/etcd" tmp
	log "building etcd $etcd_version (GOFLAGS=$GOFLAGS)"
	mkdir -p "$mod" "$etcd_dir"
	(
		cd "$mod"
		"$GO" mod init fanout-e2e/etcd >/dev/null 2>&1
		"$GO" mod edit -require="go.etcd.io/etcd/server/v3@$etcd_version"
		"$GO" mod download go.etcd.io/etcd/server/v3
	)
	tmp="$(mktemp "$etcd_dir/.etcd.tmp.XXXXXX")"
	tmp_bins+=("$tmp")
	(cd "$mod" && "$GO" build -trimpath -ldflags="-s -w" -o "$tmp" go.etcd.io/etcd/server/v3)
	install_checked "$tmp" "$etcd_bin" "etcd Version: ${etcd_version#v}"
}

build_apiserver() {
	local mod="$scratch/kube-apiserver" tmp gomod staging_version staging minor
	log "building kube-apiserver $kube_version (GOFLAGS=$GOFLAGS); this takes minutes"
	mkdir -p "$mod" "$apiserver_dir"
	cd "$mod"
	"$GO" mod init fanout-e2e/kube-apiserver >/dev/null 2>&1
	# k8s.io/kubernetes replaces its staging modules (k8s.io/api, ...) with
	# ./staging/src/...; a dependent module must pin them to published versions.
	gomod="$("$GO" mod download -json "k8s.io/kubernetes@$kube_version" |
		sed -n 's/^[[:space:]]*"GoMod":[[:space:]]*"\(.*\)",\{0,1\}$/\1/p')"
	if [[ -z "$gomod" || ! -f "$gomod" ]]; then
		log "could not locate go.mod of k8s.io/kubernetes@$kube_version"
		return 1
	fi
	staging_version="v0.${kube_version#v1.}"
	staging="$(awk '{
		for (i = 1; i < NF; i++)
			if ($i == "=>" && $(i + 1) ~ /^\.\/staging\//) { print $(i - 1); break }
	}' "$gomod" | sort -u)"
	if [[ -z "$staging" ]]; then
		log "no staging replacements found in $gomod"
		return 1
	fi
	log "pinning $(wc -l <<<"$staging") staging modules to $staging_version"
	local edits=(-require="k8s.io/kubernetes@$kube_version")
	while read -r m; do
		edits+=(-replace="$m=$m@$staging_version")
	done <<<"$staging"
	"$GO" mod edit "${edits[@]}"

	minor="${kube_version#v1.}"
	minor="${minor%%.*}"
	local ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags="$ldflags -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ldflags="$ldflags -X $pkg.gitTreeState=clean"
	done
	tmp="$(mktemp "$apiserver_dir/.kube-apiserver.tmp.XXXXXX")"
	tmp_bins+=("$tmp")
	"$GO" build -trimpath -ldflags="$ldflags" -o "$tmp" k8s.io/kubernetes/cmd/kube-apiserver
	cd - >/dev/null
	install_checked "$tmp" "$apiserver_bin" "Kubernetes $kube_version"
}

start=$SECONDS
# Not "[[ ... ]] || build_x": set -e is ignored inside functions called there.
if [[ ! -x "$etcd_bin" ]]; then
	build_etcd
fi
if [[ ! -x "$apiserver_bin" ]]; then
	build_apiserver
fi
log "done in $((SECONDS - start))s"
done_print
