#!/usr/bin/env bash
# Lints the GitHub Actions workflows with zizmor (template injection, credential
# persistence, excessive permissions, unpinned actions, …), pedantic persona, offline.
#
# Usage: scripts/lint-workflows.sh
#   PERPLEXITY_AGENT_TOOLS  cache root for the tool (default /var/tmp/perplexity-agent-tools);
#                           zizmor is installed from PyPI into a venv there, once per version.
set -euo pipefail
cd "$(dirname "$0")/.."

zizmor_version=1.32.0
tools=${PERPLEXITY_AGENT_TOOLS:-/var/tmp/perplexity-agent-tools}
venv="$tools/zizmor-$zizmor_version"

# The marker is written last, so an interrupted install is redone, not half-used.
if [ ! -f "$venv/.installed" ]; then
    rm -rf "$venv"
    mkdir -p "$tools"
    python3 -m venv "$venv" || { echo "lint-workflows: python3 -m venv failed (install python3-venv)" >&2; exit 1; }
    "$venv/bin/pip" install --quiet --disable-pip-version-check "zizmor==$zizmor_version" \
        || { echo "lint-workflows: could not install zizmor $zizmor_version from PyPI" >&2; exit 1; }
    touch "$venv/.installed"
fi

# First a workflow with a template injection and an unpinned action: if zizmor passes
# that, it is not auditing anything and a clean result below would mean nothing.
bad=$(mktemp -d)
trap 'rm -rf "$bad"' EXIT
mkdir -p "$bad/.github/workflows"
cat >"$bad/.github/workflows/bad.yml" <<'EOF'
on: pull_request_target
permissions: {}
jobs:
  j:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.pull_request.title }}"
EOF
if "$venv/bin/zizmor" --offline --no-progress --quiet "$bad/.github/workflows/" >/dev/null 2>&1; then
    echo "lint-workflows: zizmor found nothing in a known-bad workflow; is it working?" >&2
    exit 1
fi

# --offline: the online audits (impostor commits, known-vulnerable actions) need GitHub's API.
"$venv/bin/zizmor" --offline --persona pedantic --no-progress .github/workflows/
