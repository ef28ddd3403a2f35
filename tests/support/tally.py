"""The pass/fail tally shared by the Python suites (tests/interop, tests/contract): one
line per check (`PASS name`, or `FAIL name: why` with the rest of `why` indented below),
safe to call from several threads."""

from __future__ import annotations

import os
import threading


class Tally:
    def __init__(self, name: str = "") -> None:
        self.name = name
        self.passed = 0
        self.failed = 0
        self.failures: list[str] = []
        self._lock = threading.Lock()

    def check(self, name: str, ok: bool, why: str = "") -> bool:
        with self._lock:
            if ok:
                self.passed += 1
                print(f"PASS {name}", flush=True)
            else:
                self.failed += 1
                self.failures.append(name)
                first, _, rest = (why or "failed").partition("\n")
                print(f"FAIL {name}: {first}", flush=True)
                for line in rest.splitlines():
                    print(f"     {line}", flush=True)
        return ok

    def finish(self) -> int:
        """Prints the summary (prefixed with the tally's name, so that only run.sh's
        total is a bare `N passed, M failed` line) and appends it to
        `$INTEROP_SUMMARY_FILE` when set; the exit status."""
        if self.failures:
            print(f"[{self.name}] failed checks:")
            for f in self.failures:
                print(f"  - {f}")
        print(f"[{self.name}] {self.passed} passed, {self.failed} failed", flush=True)
        out = os.environ.get("INTEROP_SUMMARY_FILE")
        if out:
            with open(out, "a", encoding="utf-8") as fh:
                fh.write(f"{self.name} {self.passed} {self.failed}\n")
        return 1 if self.failed else 0
