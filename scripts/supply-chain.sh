#!/usr/bin/env bash
# Supply-chain checks with cargo-deny (deny.toml): RustSec advisories, licenses, banned
# or duplicated crates, and sources (crates.io only).
#
# Usage: scripts/supply-chain.sh [--advisory-db PATH] [--print-cargo-deny]
#   --advisory-db PATH   check against this copy of github.com/rustsec/advisory-db (a git
#                        bundle or a clone), fully offline. Without it, cargo-deny fetches
#                        the live database, which needs github.com.
#   --print-cargo-deny   install cargo-deny if needed, print its path and exit.
#
#   PERPLEXITY_AGENT_TOOLS  cache root (default /var/tmp/perplexity-agent-tools): cargo-deny
#                           is built there once per version, databases are kept there.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo_deny_version=0.20.2
tools=${PERPLEXITY_AGENT_TOOLS:-/var/tmp/perplexity-agent-tools}
advisory_db=
print_only=

die() { echo "supply-chain: $*" >&2; exit 1; }
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

while [ $# -gt 0 ]; do
    case $1 in
        --advisory-db) [ $# -ge 2 ] || usage; advisory_db=$2; shift 2 ;;
        --print-cargo-deny) print_only=1; shift ;;
        -h|--help) usage ;;
        *) echo "supply-chain: unknown argument $1" >&2; usage ;;
    esac
done

# The cache decides what the checks trust: refuse one that someone else could have filled.
mkdir -p "$tools"
[ -O "$tools" ] || die "$tools belongs to another user; set PERPLEXITY_AGENT_TOOLS to a directory of yours"
if [ -n "$(find "$tools" -maxdepth 0 -perm /022)" ]; then
    die "$tools is writable by others; chmod go-w it or set PERPLEXITY_AGENT_TOOLS"
fi

deny_root="$tools/cargo-deny-$cargo_deny_version"
cargo_deny="$deny_root/bin/cargo-deny"
if [ ! -x "$cargo_deny" ]; then
    echo "supply-chain: building cargo-deny $cargo_deny_version into $deny_root (once; a few minutes)" >&2
    # Its own target dir: not the project's shared one, and removed once installed.
    CARGO_TARGET_DIR="$tools/build-cargo-deny-$cargo_deny_version" \
        cargo install --quiet --locked "cargo-deny@$cargo_deny_version" --root "$deny_root" \
        || die "could not build cargo-deny $cargo_deny_version (needs crates.io and a C compiler)"
    rm -rf "$tools/build-cargo-deny-$cargo_deny_version"
fi
if [ -n "$print_only" ]; then
    echo "$cargo_deny"
    exit 0
fi
export PATH="$deny_root/bin:$PATH"

start=$(date +%s)
# Every crate of every platform, so --offline has all it reads.
cargo fetch --locked --quiet || die "cargo fetch failed (crates.io unreachable? Cargo.lock out of date?)"

# The folder cargo-deny derives from its default database URL,
# https://github.com/rustsec/advisory-db (a hash of the URL; see deny.toml's db-path).
db_dir_name=advisory-db-3157b0e258782691
offline=()
if [ -n "$advisory_db" ]; then
    [ -e "$advisory_db" ] || die "no advisory database at $advisory_db"
    dbs="$tools/advisory-dbs/snapshot"
    # A fresh clone each run: nothing left over from an earlier snapshot or a live fetch.
    rm -rf "$dbs"
    mkdir -p "$dbs"
    git -c init.defaultBranch=main clone --quiet "$advisory_db" "$dbs/$db_dir_name" \
        || die "$advisory_db is not a git bundle or repository of rustsec/advisory-db"
    offline=(--offline)
    kind=snapshot
else
    dbs="$tools/advisory-dbs/live"
    kind="live fetch"
fi
export PERPLEXITY_AGENT_ADVISORY_DBS=$dbs

status=0
cargo deny --locked "${offline[@]}" --config deny.toml check --show-stats --hide-inclusion-graph || status=$?

# Said after the results, where it is read: a clean result against an old snapshot
# only says nothing was known by that date.
db="$dbs/$db_dir_name"
if [ -d "$db/.git" ] || [ -f "$db/HEAD" ]; then
    commit=$(git -C "$db" log -1 --format='%h %cs')
    age_days=$(( ($(date +%s) - $(git -C "$db" log -1 --format=%ct)) / 86400 ))
    echo "supply-chain: advisory database ($kind): commit ${commit% *} of ${commit#* }, $age_days days old"
    if [ "$age_days" -gt 30 ]; then
        echo "supply-chain: warning: the advisory database is $age_days days old; advisories since then were not checked" >&2
    fi
else
    echo "supply-chain: no advisory database was loaded (see the errors above)" >&2
    if [ -z "$advisory_db" ]; then
        echo "supply-chain: without github.com, pass a snapshot: --advisory-db PATH (a git bundle or clone of rustsec/advisory-db)" >&2
    fi
fi
echo "supply-chain: cargo-deny $cargo_deny_version, $(( $(date +%s) - start ))s"
exit "$status"
