#!/bin/sh
# Installs a prebuilt perplexity-agent from a GitHub release, after checking the archive
# against the release's SHA256SUMS.
#
#   curl -fsSL https://github.com/perplexity-agent/perplexity-agent/releases/latest/download/install.sh | sh
#   sh install.sh [--version vX.Y.Z] [--to DIR] [--base URL]
#
#   --version V    a release tag (default: the latest release)
#   --to DIR       where to put the binary (default: ~/.local/bin)
#   --base URL     where the archives and SHA256SUMS are (default: the release's download
#                  URL; also PERPLEXITY_AGENT_INSTALL_BASE), e.g. a mirror
#   --print-target print the platform's archive name and exit
#
# Linux (x86_64, aarch64; static binaries) and macOS (x86_64, arm64). On Windows, download
# perplexity-agent-x86_64-pc-windows-msvc.zip from the release page.
set -eu

repo_url=https://github.com/perplexity-agent/perplexity-agent
version=
to=
base=${PERPLEXITY_AGENT_INSTALL_BASE:-}
print_target=

say() { printf '%s\n' "install.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }
usage() {
    # Piped into sh, there is no file to read the text from.
    if [ -f "$0" ]; then sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    else say "usage: sh install.sh [--version vX.Y.Z] [--to DIR] [--base URL] [--print-target]"
    fi
    exit "$1"
}

while [ $# -gt 0 ]; do
    case $1 in
        --version) [ $# -ge 2 ] || die "--version needs a tag, e.g. --version v0.1.0"; version=$2; shift 2 ;;
        --version=*) version=${1#*=}; shift ;;
        --to) [ $# -ge 2 ] || die "--to needs a directory"; to=$2; shift 2 ;;
        --to=*) to=${1#*=}; shift ;;
        --base) [ $# -ge 2 ] || die "--base needs a URL"; base=$2; shift 2 ;;
        --base=*) base=${1#*=}; shift ;;
        --print-target) print_target=1; shift ;;
        -h|--help) usage 0 ;;
        *) say "unknown argument: $1"; usage 2 ;;
    esac
done

# The release's target triple for this machine; the names the release workflow builds.
detect_target() {
    os=$(uname -s)
    arch=$(uname -m)
    case $arch in
        x86_64|amd64) arch=x86_64 ;;
        aarch64|arm64) arch=aarch64 ;;
        *) die "no prebuilt binary for the $arch architecture; build from source: cargo install --locked perplexity-agent" ;;
    esac
    case $os in
        Linux) echo "$arch-unknown-linux-musl" ;;
        Darwin)
            # An x86_64 shell under Rosetta on Apple silicon: the native build is better.
            if [ "$arch" = x86_64 ] && [ "$(sysctl -n sysctl.proc_translated 2>/dev/null || true)" = 1 ]; then
                arch=aarch64
            fi
            echo "$arch-apple-darwin" ;;
        MINGW*|MSYS*|CYGWIN*|Windows_NT)
            die "on Windows, download perplexity-agent-x86_64-pc-windows-msvc.zip from $repo_url/releases" ;;
        *) die "no prebuilt binary for $os; build from source: cargo install --locked perplexity-agent" ;;
    esac
}

target=$(detect_target)
archive="perplexity-agent-$target.tar.gz"
if [ -n "$print_target" ]; then
    echo "$archive"
    exit 0
fi

if [ -z "$base" ]; then
    if [ -n "$version" ]; then
        base="$repo_url/releases/download/$version"
    else
        base="$repo_url/releases/latest/download"
    fi
fi
base=${base%/}
if [ -z "$to" ]; then
    [ -n "${HOME:-}" ] || die "HOME is not set; say where to install with --to DIR"
    to="$HOME/.local/bin"
fi

case $base in
    https://*) ;;
    http://127.0.0.1[:/]*|http://localhost[:/]*|http://\[::1\][:/]*) ;;
    http://*) say "warning: $base is plain http: the checksum only guards against a broken download, not a tampered one" ;;
    *) die "the base URL must start with https:// (got $base)" ;;
esac

if command -v curl >/dev/null 2>&1; then
    fetch() {
        case $1 in
            # Refuse a redirect to plain http.
            https://*) curl --fail --silent --show-error --location --proto '=https' --tlsv1.2 -o "$2" "$1" ;;
            *) curl --fail --silent --show-error --location -o "$2" "$1" ;;
        esac
    }
elif command -v wget >/dev/null 2>&1; then
    fetch() {
        case $1 in
            https://*) wget --quiet --https-only -O "$2" "$1" ;;
            *) wget --quiet -O "$2" "$1" ;;
        esac
    }
else
    die "neither curl nor wget is installed; install one of them and run this again"
fi

if command -v sha256sum >/dev/null 2>&1; then
    sha256() { sha256sum "$1" | awk '{print $1}'; }
elif command -v shasum >/dev/null 2>&1; then
    sha256() { shasum -a 256 "$1" | awk '{print $1}'; }
else
    die "neither sha256sum nor shasum is installed; install coreutils (or perl's shasum)"
fi

tmp=$(mktemp -d 2>/dev/null || mktemp -d -t perplexity-agent)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

say "downloading $archive from $base"
fetch "$base/$archive" "$tmp/$archive" || die "could not download $base/$archive (is there a release${version:+ $version} for $target?)"
fetch "$base/SHA256SUMS" "$tmp/SHA256SUMS" || die "could not download $base/SHA256SUMS"

# sha256sum lines: "<hex>  <name>" (or "<hex> *<name>" in binary mode).
expected=$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1; exit }' "$tmp/SHA256SUMS")
[ -n "$expected" ] || die "SHA256SUMS has no entry for $archive; nothing was installed"
actual=$(sha256 "$tmp/$archive")
if [ "$expected" != "$actual" ]; then
    say "error: checksum mismatch for $archive"
    say "  expected (SHA256SUMS): $expected"
    say "  downloaded file:       $actual"
    die "refusing to install a file that does not match its checksum; nothing was installed. Try again, or report it at $repo_url/issues"
fi
say "checksum ok (sha256 $actual)"

(cd "$tmp" && tar -xzf "$archive") || die "could not unpack $archive; nothing was installed"
binary="$tmp/perplexity-agent-$target/perplexity-agent"
[ -f "$binary" ] || die "$archive does not hold perplexity-agent-$target/perplexity-agent; nothing was installed"

mkdir -p "$to" || die "cannot create $to; choose another directory with --to DIR"
# Copy beside the destination, then rename: a running copy is never half-overwritten.
cp "$binary" "$to/.perplexity-agent.part.$$" || die "cannot write to $to; choose another directory with --to DIR"
chmod 755 "$to/.perplexity-agent.part.$$"
mv -f "$to/.perplexity-agent.part.$$" "$to/perplexity-agent"

installed="$to/perplexity-agent"
if ran=$("$installed" --version 2>/dev/null); then
    say "installed $ran at $installed"
else
    say "installed $installed, but it does not run here ($target); please report it at $repo_url/issues"
fi
case ":${PATH:-}:" in
    *":$to:"*|*":$to/:"*) say "$to is on your PATH: run perplexity-agent --help" ;;
    *) say "$to is not on your PATH; add it, e.g. in ~/.profile: export PATH=\"$to:\$PATH\"" ;;
esac
