#!/usr/bin/env bash
# Each cargo-deny check of deny.toml can fail: throwaway crates (in a temp dir, resolved
# offline from the local cargo registry cache) that break one rule each must be rejected,
# and a control crate that breaks none must pass. The advisories case uses a one-advisory
# database made here, so it needs neither GitHub nor a snapshot and never goes stale.
#
# Usage: tests/distribution/deny_selftest.sh
#   Needs the crates of Cargo.lock in the local registry cache (scripts/supply-chain.sh
#   runs `cargo fetch --locked`; so does any build). Installs cargo-deny via that script.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

fail() { echo "deny_selftest: FAIL: $*" >&2; exit 1; }

cargo_deny=$(bash scripts/supply-chain.sh --print-cargo-deny)
PATH="$(dirname "$cargo_deny"):$PATH"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Lock files and builds of the throwaway crates stay in the temp dir.
export CARGO_TARGET_DIR="$work/target"

# A small crate the project already locks, so it is in the local cache.
itoa=$(awk '/^name = "itoa"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
[ -n "$itoa" ] || fail "itoa is no longer in Cargo.lock; pick another small locked crate"

# crate NAME LICENSE DEPENDENCY-LINE: a one-file library crate under $work/NAME.
crate() {
    mkdir -p "$work/$1/src"
    : >"$work/$1/src/lib.rs"
    cat >"$work/$1/Cargo.toml" <<EOF
[package]
name = "$1"
version = "0.1.0"
edition = "2021"
license = "$2"

[dependencies]
$3

[workspace]
EOF
    (cd "$work/$1" && cargo generate-lockfile --offline --quiet) \
        || fail "could not resolve $1 offline ($3); run cargo fetch --locked in the project first"
}

# The advisory database cargo-deny reads (the folder name is its hash of the default URL;
# see scripts/supply-chain.sh): one advisory against every version of itoa.
advisory_db() { # ADVISED-CRATE
    local db="$work/dbs-$1/advisory-db-3157b0e258782691"
    mkdir -p "$db/crates/$1"
    cat >"$db/crates/$1/RUSTSEC-2099-0001.md" <<EOF
\`\`\`toml
[advisory]
id = "RUSTSEC-2099-0001"
package = "$1"
date = "2099-01-01"
url = "https://example.invalid/selftest"
categories = ["memory-corruption"]

[versions]
patched = []
\`\`\`

# deny_selftest: every version of $1 is advised against
EOF
    git -C "$db" init --quiet
    git -C "$db" add -A
    git -C "$db" -c user.name=selftest -c user.email=selftest@example.invalid commit --quiet -m selftest
    echo "$work/dbs-$1"
}

# check NAME CHECK DBS: cargo deny with the project's deny.toml; output in $work/NAME.out.
check() {
    (cd "$work/$1" && PERPLEXITY_AGENT_ADVISORY_DBS=$3 \
        cargo deny --offline --locked --color never --config "$root/deny.toml" check "$2" \
        >"$work/$1.out" 2>&1)
}

expect_fail() { # NAME CHECK DBS WANTED-TEXT
    if check "$1" "$2" "$3"; then
        fail "cargo deny check $2 passed $1:"$'\n'"$(cat "$work/$1.out")"
    fi
    grep -q -- "$4" "$work/$1.out" \
        || fail "cargo deny check $2 failed $1 without '$4':"$'\n'"$(cat "$work/$1.out")"
    echo "-- check $2 rejects $1 (${4//\\/})"
}

dbs_other=$(advisory_db no-such-crate-in-the-graph)
dbs_itoa=$(advisory_db itoa)

crate control "MIT" "itoa = \"=$itoa\""
for c in advisories bans licenses sources; do
    check control "$c" "$dbs_other" || fail "the control crate failed check $c:"$'\n'"$(cat "$work/control.out")"
done
echo "-- the control crate passes all four checks"

expect_fail control advisories "$dbs_itoa" "error\[vulnerability\]"

crate gpl "GPL-3.0-only" "itoa = \"=$itoa\""
expect_fail gpl licenses "$dbs_other" "error\[rejected\]"

crate wildcard "MIT" 'itoa = "*"'
expect_fail wildcard bans "$dbs_other" "error\[wildcard\]"

# A git dependency, from a local repository so nothing leaves the machine.
git init --quiet "$work/gitdep"
mkdir -p "$work/gitdep/src"
: >"$work/gitdep/src/lib.rs"
printf '[package]\nname = "gitdep"\nversion = "0.1.0"\nedition = "2021"\nlicense = "MIT"\n\n[workspace]\n' \
    >"$work/gitdep/Cargo.toml"
git -C "$work/gitdep" add -A
git -C "$work/gitdep" -c user.name=selftest -c user.email=selftest@example.invalid commit --quiet -m gitdep
# A private CARGO_HOME: cargo keeps its git checkouts there, out of the user's.
mkdir -p "$work/git-src/src"
: >"$work/git-src/src/lib.rs"
printf '[package]\nname = "git-src"\nversion = "0.1.0"\nedition = "2021"\nlicense = "MIT"\n\n[dependencies]\ngitdep = { git = "file://%s" }\n\n[workspace]\n' \
    "$work/gitdep" >"$work/git-src/Cargo.toml"
(cd "$work/git-src" && CARGO_HOME="$work/cargo-home" cargo generate-lockfile --quiet) \
    || fail "could not resolve a file:// git dependency"
if (cd "$work/git-src" && CARGO_HOME="$work/cargo-home" cargo deny --offline --locked --color never \
    --config "$root/deny.toml" check sources >"$work/git-src.out" 2>&1); then
    fail "cargo deny check sources passed a git dependency:"$'\n'"$(cat "$work/git-src.out")"
fi
grep -q "error\[source-not-allowed\]" "$work/git-src.out" \
    || fail "check sources failed the git dependency for another reason:"$'\n'"$(cat "$work/git-src.out")"
echo "-- check sources rejects git-src (a git dependency)"

echo "deny_selftest: ok"
