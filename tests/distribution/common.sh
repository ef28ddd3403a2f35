# shellcheck shell=bash
# Sourced by tests/distribution/*_test.sh: the pinned-tool helpers (packaging/lib.sh), a
# pass/fail tally whose last line is `N passed, M failed`, the elapsed time, and the
# fake upstream on a loopback port.
#
#   check "what" CMD...    # runs CMD (output kept in $T/check.log, shown on failure)
#   expect_fail "what" CMD...  # passes when CMD fails: the test's broken-input cases
#   finish                 # the tally and time; exit status 1 if anything failed
#   start_fake             # sets FAKE_URL (http://127.0.0.1:PORT); stopped at exit
#   binary_arg LAST "$@"   # the one BINARY argument as an absolute path in $binary, else
#                          # the usage (the script's header, lines 2-LAST) and exit 2

source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../../packaging" && pwd)/lib.sh"
DIST_HERE="$PACK_REPO/tests/distribution"  # used by the tests that source this
export DIST_HERE
# The packages are tested here, not the research cache: with it on, an answer kept in this
# user's store by one run of these tests would answer the next (tests/e2e/cache.rs tests it).
export PERPLEXITY_CACHE=off
T="$(mktemp -d "${TMPDIR:-/tmp}/pa-dist.XXXXXX")"
_passed=0
_failed=0
_started=$SECONDS
_cleanups=()
_cleanup() {
  local c
  for c in "${_cleanups[@]}"; do eval "$c" || true; done
  rm -rf "$T"
}
trap _cleanup EXIT
on_exit() { _cleanups+=("$1"); }

_run() {
  local what="$1" want="$2"; shift 2
  local rc=0
  "$@" >"$T/check.log" 2>&1 || rc=$?
  if { [ "$want" = ok ] && [ "$rc" -eq 0 ]; } || { [ "$want" = fail ] && [ "$rc" -ne 0 ]; }; then
    echo "ok   $what"
    _passed=$((_passed + 1))
  else
    echo "FAIL $what (exit $rc$([ "$want" = fail ] && echo ', expected a failure'))"
    sed 's/^/     | /' "$T/check.log" | tail -n 40
    _failed=$((_failed + 1))
  fi
}
check() { _run "$1" ok "${@:2}"; }
expect_fail() { _run "$1" fail "${@:2}"; }

finish() {
  echo "${0##*/}: $((SECONDS - _started))s"
  echo "distribution: $_passed passed, $_failed failed"
  [ "$_failed" -eq 0 ]
}

fake_binary() {
  echo "${FAKE_BIN:-${CARGO_TARGET_DIR:-$PACK_REPO/target}/debug/fake-perplexity}"
}

start_fake() {
  local fake line
  fake="$(fake_binary)"
  [ -x "$fake" ] || pack_die "no fake-perplexity at $fake (cargo build -p fake-perplexity, or set FAKE_BIN)"
  "$fake" --port 0 ${1:+--scenario "$1"} >"$T/fake.out" 2>"$T/fake.err" &
  FAKE_PID=$!
  on_exit "kill $FAKE_PID 2>/dev/null; wait $FAKE_PID 2>/dev/null"
  for _ in $(seq 100); do
    line="$(head -n1 "$T/fake.out" 2>/dev/null || true)"
    [ -n "$line" ] && break
    sleep 0.05
  done
  case "$line" in
    "listening on http://127.0.0.1:"*) FAKE_URL="${line#listening on }" ;;
    *) pack_die "fake-perplexity did not start: '$line' $(cat "$T/fake.err")" ;;
  esac
}

# POST/GET the fake's control API (loopback only; never through a proxy).
fake_control() {
  local method="$1" path="$2" body="${3:-}"
  curl -sf --noproxy '*' -X "$method" ${body:+-H 'Content-Type: application/json' -d "$body"} "$FAKE_URL/_control/$path"
}

binary_arg() {
  local last="$1"; shift
  [ $# -eq 1 ] || { sed -n "2,${last}p" "$0" | sed 's/^# \{0,1\}//'; exit 2; }
  binary="$(realpath "$1")"
  [ -x "$binary" ] || pack_die "no executable at $1"
}
