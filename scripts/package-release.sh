#!/usr/bin/env bash
# Makes the release archives and their checksum file, the same way for the release
# workflow (.github/workflows/release.yml) and for tests/distribution/install_test.sh, so
# install.sh is tested against exactly what a release ships.
#
# Usage:
#   scripts/package-release.sh archive TARGET BINARY OUTDIR
#       OUTDIR/perplexity-agent-TARGET.tar.gz (.zip for a windows TARGET), holding the
#       folder perplexity-agent-TARGET/ with the binary (stripped of its symbols;
#       $STRIP, default strip), README.md and both licenses.
#       Prints the archive's path.
#   scripts/package-release.sh sums DIR
#       DIR/SHA256SUMS for every archive and SBOM in DIR (and install.sh if there), in
#       `sha256sum` format.
#
# Archive names carry no version, so .../releases/latest/download/NAME always resolves.
set -euo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "package-release: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)

sha256() {
    if command -v sha256sum >/dev/null 2>&1; then sha256sum -- "$@"
    elif command -v shasum >/dev/null 2>&1; then shasum -a 256 -- "$@"
    else die "neither sha256sum nor shasum is installed"
    fi
}

archive() {
    local target=$1 binary=$2 outdir=$3
    [[ $target =~ ^[a-z0-9_]+(-[a-z0-9_]+){2,3}$ ]] || die "'$target' is not a target triple"
    [ -f "$binary" ] || die "no binary at $binary (build it first)"
    mkdir -p "$outdir"
    outdir=$(cd "$outdir" && pwd)

    local name="perplexity-agent-$target" exe=perplexity-agent
    [[ $target == *windows* ]] && exe=perplexity-agent.exe
    local stage
    stage=$(mktemp -d)
    # A subshell's trap would not outlive it; clean up on every path out of this function.
    trap 'rm -rf "$stage"' RETURN
    mkdir "$stage/$name"
    cp "$binary" "$stage/$name/$exe"
    chmod 755 "$stage/$name/$exe"
    # Symbols are for debugging a build, not for running it (a quarter of the file).
    # Stripped here, after linking, not by the release profile: a profile change moves
    # the mangled names link/startup.order lays out, and its generator needs them.
    # Windows executables keep their symbols in a separate .pdb already. STRIP names
    # another strip (e.g. llvm-strip for a cross build).
    if [[ $target != *windows* ]]; then
        local before after
        before=$(wc -c <"$stage/$name/$exe")
        "${STRIP:-strip}" "$stage/$name/$exe" \
            || die "${STRIP:-strip} cannot strip $binary; set STRIP to a strip for $target"
        after=$(wc -c <"$stage/$name/$exe")
        echo "package-release: $exe stripped: $before -> $after bytes" >&2
    fi
    cp "$root/README.md" "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$stage/$name/"

    if [[ $target == *windows* ]]; then
        rm -f "$outdir/$name.zip"
        if command -v zip >/dev/null 2>&1; then
            (cd "$stage" && zip -qr "$outdir/$name.zip" "$name")
        elif command -v 7z >/dev/null 2>&1; then
            (cd "$stage" && 7z a -tzip -bd "$outdir/$name.zip" "$name" >/dev/null)
        else
            die "neither zip nor 7z is installed"
        fi
        echo "$outdir/$name.zip"
    else
        (cd "$stage" && tar -czf "$outdir/$name.tar.gz" "$name")
        echo "$outdir/$name.tar.gz"
    fi
}

sums() {
    local dir=$1
    [ -d "$dir" ] || die "no directory $dir"
    cd "$dir"
    shopt -s nullglob
    local files=(perplexity-agent-*.tar.gz perplexity-agent-*.zip *.cdx.json)
    [ ${#files[@]} -gt 0 ] || die "no archives in $dir"
    [ -f install.sh ] && files+=(install.sh)
    # Sorted, so the file is the same whatever order the artifacts arrived in.
    mapfile -t files < <(printf '%s\n' "${files[@]}" | LC_ALL=C sort)
    sha256 "${files[@]}" > SHA256SUMS.tmp
    mv SHA256SUMS.tmp SHA256SUMS
    cat SHA256SUMS
}

case "${1:-}" in
    archive) [ $# -eq 4 ] || usage; archive "$2" "$3" "$4" ;;
    sums) [ $# -eq 2 ] || usage; sums "$2" ;;
    *) usage ;;
esac
