#!/usr/bin/env bash
# tools.sh builds and locates the development tools pinned in tools/go.mod
# (Mailpit for the email sink's integration tests, Jaeger for the tracing
# tests) and tools/helm/go.mod (Helm, for the chart's tests). The tools live
# in Go modules of their own so their dependencies never reach outboxd's
# go.mod; Helm has a module apart so that its Kubernetes libraries neither
# move Jaeger's nor change the stamp that would rebuild Jaeger.
#
# Usage:
#   scripts/tools.sh build [tool...]   build the tools (default: all) unless up to date
#   scripts/tools.sh path TOOL         print the binary path of TOOL
#   scripts/tools.sh run TOOL [args]   build TOOL if needed and run it in the
#                                      foreground on 127.0.0.1 (args replace
#                                      the defaults below)
#   scripts/tools.sh list              print the known tool names
#
# Binaries go to ${OUTBOXD_TOOLS_BIN:-$HOME/.cache/outboxd/bin}. Each binary
# has a stamp file holding a hash of its module's go.mod and go.sum and the
# Go version; a tool is rebuilt only when its binary or stamp is missing or the
# hash changed, so CI caches and repeated test runs reuse the build. A lock
# file per tool serialises concurrent builds of the same tool.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools_dir="$root/tools"
bin_dir="${OUTBOXD_TOOLS_BIN:-$HOME/.cache/outboxd/bin}"

# Tool name -> Go package path; keep in sync with the tool directives in
# tools/go.mod and tools/helm/go.mod.
declare -A packages=(
	[mailpit]=github.com/axllent/mailpit
	[jaeger]=github.com/jaegertracing/jaeger/cmd/jaeger
	[helm]=helm.sh/helm/v3/cmd/helm
)

# Tool name -> its module's directory below tools/, for a tool outside
# tools/go.mod.
declare -A modules=(
	[helm]=helm
)

# Default arguments of "run": local-only listeners, no phoning home.
declare -A run_args=(
	[mailpit]="--listen 127.0.0.1:8025 --smtp 127.0.0.1:1025 --disable-version-check --smtp-auth-accept-any --smtp-auth-allow-insecure"
	[jaeger]="--config file:$tools_dir/jaeger/config.yaml"
	[helm]="version"
)

# The tools are test fixtures: they build unoptimized and without debug
# information, which cuts a fresh machine's build by about a quarter
# (Mailpit from an empty cache: 88 s optimized, 63 s so) and costs the
# tests nothing they measure.
build_flags=(-gcflags='all=-N -l' -ldflags='-s -w')

die() {
	echo "tools.sh: $*" >&2
	exit 1
}

package_of() {
	local pkg="${packages[$1]:-}"
	[[ -n "$pkg" ]] || die "unknown tool '$1' (known: ${!packages[*]})"
	echo "$pkg"
}

# module_of is the directory of the Go module that pins tool $1.
module_of() {
	echo "$tools_dir${modules[$1]:+/${modules[$1]}}"
}

# stamp_hash identifies the inputs of a build of tool $1: the pinned
# versions and the toolchain that compiles them.
stamp_hash() {
	local dir
	dir="$(module_of "$1")"
	{
		cat "$dir/go.mod" "$dir/go.sum"
		(cd "$dir" && go version)
	} | sha256sum | cut -d' ' -f1
}

build_one() {
	local name="$1" pkg bin stamp want start
	pkg="$(package_of "$name")"
	bin="$bin_dir/$name"
	stamp="$bin_dir/.$name.stamp"
	want="$(stamp_hash "$name")"
	mkdir -p "$bin_dir"
	# One build per tool at a time: parallel test packages and CI steps
	# asking for the same tool wait for the first build instead of
	# compiling it again (Jaeger takes minutes).
	exec {lock}>"$bin_dir/.$name.lock"
	flock "$lock"
	if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
		echo "tools.sh: $name is up to date ($bin)" >&2
		exec {lock}>&-
		return
	fi
	echo "tools.sh: building $name ($pkg) ..." >&2
	start=$SECONDS
	# Build next to the target and rename, so a concurrent reader never sees
	# a half-written binary.
	(cd "$(module_of "$name")" && go build "${build_flags[@]}" -o "$bin.tmp.$$" "$pkg")
	mv -f "$bin.tmp.$$" "$bin"
	echo "$want" >"$stamp"
	exec {lock}>&-
	echo "tools.sh: built $name in $((SECONDS - start))s" >&2
}

cmd="${1:-}"
shift || true
case "$cmd" in
build)
	if [[ $# -eq 0 ]]; then
		set -- "${!packages[@]}"
	fi
	for name in "$@"; do
		build_one "$name"
	done
	;;
path)
	[[ $# -eq 1 ]] || die "usage: tools.sh path TOOL"
	package_of "$1" >/dev/null
	echo "$bin_dir/$1"
	;;
run)
	[[ $# -ge 1 ]] || die "usage: tools.sh run TOOL [args]"
	name="$1"
	shift
	build_one "$name"
	if [[ $# -eq 0 ]]; then
		# shellcheck disable=SC2086 # the defaults are word lists
		set -- ${run_args[$name]}
	fi
	exec "$bin_dir/$name" "$@"
	;;
list)
	printf '%s\n' "${!packages[@]}" | sort
	;;
*)
	die "usage: tools.sh build [tool...] | path TOOL | run TOOL [args] | list"
	;;
esac
