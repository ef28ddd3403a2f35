"""The contract suite's entry point: runs the self-tests, the product's request bodies and
the fake's answers against the official SDK, and prints `N passed, M failed` last.

    python contract.py [selftest] [product] [fake]     (all three by default)
"""

from __future__ import annotations

import sys
import time
import traceback

from common import Tally


def main(argv: list[str]) -> int:
    parts = [a for a in argv if not a.startswith("-")] or ["selftest", "product", "fake"]
    tally = Tally()
    import sdk

    problem = sdk.check_version()
    tally.check(f"perplexityai {sdk.SDK_VERSION} installed", problem is None, problem or "")
    started = time.monotonic()
    for part in parts:
        print(f"\n=== {part} ===", flush=True)
        try:
            if part == "selftest":
                import selftest
                selftest.run(tally)
            elif part == "product":
                import product_bodies
                product_bodies.run(tally)
            elif part == "fake":
                import fake_answers
                fake_answers.run(tally)
            else:
                tally.check(f"part {part}", False, "unknown part (selftest, product, fake)")
        except Exception:  # noqa: BLE001 - a crashed part is one failure, with its traceback
            tally.check(f"part {part} ran to the end", False, traceback.format_exc())
    if "fake" in parts or "selftest" in parts:
        import sdk as _sdk
        print("\nallowances (the one table of tolerated SDK rejections; unused = stale):")
        for a in _sdk.ALLOWANCES:
            print(f"  {a.key}: used {a.used}x — {a.reason}")
    print(f"\n({time.monotonic() - started:.1f}s)")
    print(f"{tally.passed} passed, {tally.failed} failed", flush=True)
    return 1 if tally.failed or tally.passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
