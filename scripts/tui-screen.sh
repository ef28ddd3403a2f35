#!/usr/bin/env bash
# Prints the picture in docs/tui.md: the terminal workspace after one question, as a
# person sees it, from a real run against the loopback fake upstream.
#
#   bash scripts/tui-screen.sh [PERPLEXITY_AGENT_BINARY [FAKE_PERPLEXITY_BINARY]]
#
# Needs tmux (Debian: apt-get install tmux). Defaults to the debug builds under
# $CARGO_TARGET_DIR (or ./target). Talks to loopback only; the key is a test key.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
agent=${1:-$target/debug/perplexity-agent}
fake=${2:-$target/debug/fake-perplexity}
command -v tmux >/dev/null || { echo "tui-screen: tmux is not installed (apt-get install tmux)" >&2; exit 2; }
for bin in "$agent" "$fake"; do
  [ -x "$bin" ] || { echo "tui-screen: no binary at $bin (cargo build --workspace)" >&2; exit 2; }
done

work=$(mktemp -d)
session="tui-screen-$$"
fake_pid=""
cleanup() {
  tmux kill-session -t "$session" 2>/dev/null || true
  [ -n "$fake_pid" ] && kill "$fake_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$fake" --port 0 >"$work/fake.out" 2>/dev/null &
fake_pid=$!
for _ in $(seq 100); do [ -s "$work/fake.out" ] && break; sleep 0.05; done
base=$(sed -n 's/^listening on //p' "$work/fake.out" | head -n1)
[ -n "$base" ] || { echo "tui-screen: the fake did not start" >&2; exit 1; }

# A fixed terminal and a scratch home, so the picture depends on nothing of the caller's.
tmux new-session -d -s "$session" -x 100 -y 30 \
  env -i PATH="$PATH" HOME="$work" TERM=xterm-256color \
  PERPLEXITY_API_KEY=pplx-test PERPLEXITY_API_BASE="$base" \
  PERPLEXITY_STORE_PATH="$work/store.sqlite" "$agent" tui

screen() { tmux capture-pane -p -t "$session"; }
wait_for() {
  for _ in $(seq 200); do screen | grep -q "$1" && return 0; sleep 0.05; done
  echo "tui-screen: '$1' never appeared; the screen was:" >&2
  screen >&2
  exit 1
}

wait_for "space default"
tmux send-keys -t "$session" "How did the Artemis II schedule change this year?" Enter
wait_for "Fake answer"
screen | sed -e 's/[[:space:]]*$//'
tmux send-keys -t "$session" C-c
