#!/usr/bin/env bash
# Fails when anything that looks like a real credential is in the working tree or in any
# commit of the history (a secret removed in a later commit is still published).
#
# Patterns: Perplexity keys (`pplx-` and 24+ alphanumerics; test keys here are shorter or
# contain dashes on purpose), private-key blocks, AWS access keys, GitHub tokens.
# Usage: scripts/secret-scan.sh [repo-dir]   (exit 1 and the offending commit/file on a hit)
set -euo pipefail
cd "${1:-.}"

pattern='pplx-[A-Za-z0-9]{24,}|-----BEGIN [A-Z ]*PRIVATE KEY-----|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}'

found=0
if hits=$(git grep -nE "$pattern" -- . 2>/dev/null); then
    echo "secret-scan: credential-like text in the working tree:" >&2
    echo "$hits" | cut -c1-120 | sed 's/^/  /' >&2
    found=1
fi
# -G matches commits whose diff adds or removes a line matching the pattern.
if commits=$(git log --all --format=%h -G"$pattern" -E 2>/dev/null) && [ -n "$commits" ]; then
    echo "secret-scan: credential-like text in the history, commits:" $commits >&2
    found=1
fi
if [ "$found" -eq 0 ]; then
    echo "secret-scan: clean ($(git rev-list --all --count) commits, $(git ls-files | wc -l) files)"
fi
exit "$found"
