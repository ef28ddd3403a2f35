#!/usr/bin/env python3
"""Baselines and results of the MCP conformance suite, for run.sh (standard library only).

    results.py check  --set REV --scored LIST --baseline FILE
    results.py report --set REV --scored LIST --baseline FILE --results DIR [--suite-rc N]
                      [--print-suggested] [--write-suggested FILE]
    results.py update --set REV --scored LIST --baseline FILE --results DIR

LIST is the output of `conformance list --server --requirements REV` (the set's scored
server scenarios are read from it); DIR is the suite's `-o` directory
(`server-<scenario>-<timestamp>/checks.json`); FILE is our expected-failures baseline:

    # free comments
    server:
      - some-scenario                      # reason (a whole scenario is expected to fail)
      - other-scenario:some-check-id       # reason (one check of a scenario)

`check`  validates a baseline: the format above, every entry with a `# reason`, every
         scenario scored in the set, no duplicate, no check entry beside its whole scenario.
`report` compares results with the baseline the way the suite's --expected-failures does
         (a FAILURE or WARNING is a failure; a failing scenario or check without an entry is
         unexpected; an entry whose scenario/check now passes is stale) and also flags
         entries that matched nothing (a SKIPPED or absent check). A scenario whose every
         check the suite SKIPPED is counted apart, neither passed nor failed. Prints one
         summary line; exit 0 only if the results match the baseline exactly (and
         --suite-rc is 0).
`update` rewrites the baseline to match the results: keeps entries (and their reasons)
         that still fail, drops the others, adds new failures with a `# TODO` reason.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

FAILING = ("FAILURE", "WARNING")
ENTRY_RE = re.compile(r"^[A-Za-z0-9_.\-/]+(:[A-Za-z0-9_.\-]+)?$")
SCHEMA_CHECK = "wire-schema-valid"  # the synthetic check the suite adds to every scenario


# -- inputs -------------------------------------------------------------------------------
def scored_scenarios(list_file: str) -> tuple[list[str], list[str]]:
    """(scored server scenarios in suite order, server scenarios run but not scored)."""
    scored, unscored, section = [], [], None
    for line in pathlib.Path(list_file).read_text().splitlines():
        if line.startswith("Server scenarios"):
            section = "server"
        elif line.startswith("Client scenarios") or line.startswith("Run and reported"):
            section = "notscored" if line.startswith("Run and reported") else None
        elif section == "server" and line.startswith("  - "):
            scored.append(line[4:].strip())
        elif section == "notscored" and line.rstrip().endswith("[server]"):
            unscored.append(line.strip()[2:].rsplit(" [", 1)[0])
    if not scored:
        raise SystemExit(f"results.py: no server scenarios found in {list_file}")
    return scored, unscored


class Baseline:
    def __init__(self, header: list[str], entries: list[tuple[str, str]]):
        self.header = header      # comment lines before `server:`
        self.entries = entries    # (entry, reason) in file order

    @classmethod
    def load(cls, path: str) -> "Baseline":
        header, entries, seen_key, empty_list = [], [], False, False
        for n, raw in enumerate(pathlib.Path(path).read_text().splitlines(), 1):
            line = raw.rstrip()
            if not line.strip():
                continue
            if line.lstrip().startswith("#"):
                if not seen_key:
                    header.append(line)
                continue
            if not seen_key:
                if line in ("server:", "server: []"):
                    seen_key, empty_list = True, line.endswith("[]")
                    continue
                raise ValueError(f"{path}:{n}: expected `server:` (only server entries are allowed)")
            m = re.match(r"^  - (?P<entry>\"[^\"]*\"|'[^']*'|[^\s#]+)\s*(?:#\s*(?P<reason>.*))?$", line)
            if not m:
                raise ValueError(f"{path}:{n}: expected `  - scenario[:check-id]  # reason`, got {line!r}")
            entries.append((m["entry"].strip("\"'"), (m["reason"] or "").strip()))
        if not seen_key:
            raise ValueError(f"{path}: no `server:` key")
        if empty_list and entries:
            raise ValueError(f"{path}: `server: []` followed by entries")
        if not empty_list and not entries:
            raise ValueError(f"{path}: `server:` with no entries is null to the suite: write `server: []`")
        return cls(header, entries)

    def problems(self, scored: list[str], unscored: list[str]) -> list[str]:
        out, seen = [], set()
        wholes = {e for e, _ in self.entries if ":" not in e}
        for entry, reason in self.entries:
            scenario = entry.split(":", 1)[0]
            if not ENTRY_RE.match(entry):
                out.append(f"{entry}: not `scenario` or `scenario:check-id`")
            elif scenario in unscored:
                out.append(f"{entry}: {scenario} is run but not scored in this set, so the entry does nothing")
            elif scenario not in scored:
                out.append(f"{entry}: no scored scenario {scenario!r} in this set (misspelt?)")
            if entry in seen:
                out.append(f"{entry}: listed twice")
            if ":" in entry and scenario in wholes:
                out.append(f"{entry}: redundant beside the whole-scenario entry {scenario}")
            if not reason:
                out.append(f"{entry}: no `# reason` comment")
            seen.add(entry)
        return out

    def render(self) -> str:
        lines = list(self.header)
        if not self.entries:
            return "\n".join(lines + ["server: []"]) + "\n"
        width = max(len(e) for e, _ in self.entries)
        lines.append("server:")
        for entry, reason in self.entries:
            lines.append(f"  - {entry.ljust(width)}  # {reason or 'TODO: reason'}")
        return "\n".join(lines) + "\n"


def load_results(results_dir: str) -> dict[str, list[dict]]:
    """scenario -> its checks (the newest run of each scenario), worst status per check id."""
    newest: dict[str, tuple[str, pathlib.Path]] = {}
    for f in pathlib.Path(results_dir).glob("*/checks.json"):
        m = re.match(r"^server-(.+)-(\d{4}-\d{2}-\d{2}T[\d-]+Z)$", f.parent.name)
        if m and (m[1] not in newest or m[2] > newest[m[1]][0]):
            newest[m[1]] = (m[2], f)
    rank = {"FAILURE": 3, "WARNING": 2, "SUCCESS": 1}
    out = {}
    for scenario, (_, f) in newest.items():
        try:
            checks = json.loads(f.read_text())
        except (OSError, ValueError) as err:
            checks = [{"id": scenario, "status": "FAILURE", "errorMessage": f"unreadable checks.json: {err}"}]
        worst: dict[str, dict] = {}
        for c in checks:
            if c.get("status") == "INFO":
                continue
            prev = worst.get(c["id"])
            if prev is None or rank.get(c["status"], 0) >= rank.get(prev["status"], 0):
                worst[c["id"]] = c
        out[scenario] = list(worst.values())
    return out


# -- comparison ---------------------------------------------------------------------------
def compare(scored: list[str], results: dict[str, list[dict]], baseline: Baseline) -> dict:
    wholes = {e for e, _ in baseline.entries if ":" not in e}
    by_check: dict[str, set[str]] = {}
    for e, _ in baseline.entries:
        if ":" in e:
            s, c = e.split(":", 1)
            by_check.setdefault(s, set()).add(c)
    r = {"passed": [], "failed": [], "skipped": [], "expected": [], "unexpected": [], "stale": [],
         "inert": [], "missing": []}
    for scenario in scored:
        checks = results.get(scenario)
        if checks is None:
            r["missing"].append(scenario)
            r["failed"].append(scenario)
            if scenario in wholes:
                r["expected"].append(scenario)
            else:
                r["unexpected"].append(f"{scenario} (no result: the scenario did not run)")
            continue
        failing = [c for c in checks if c["status"] in FAILING]
        (r["failed"] if failing else r["skipped"] if all_skipped(checks) else r["passed"]).append(scenario)
        if scenario in wholes:
            (r["expected"] if failing else r["stale"]).append(scenario)
            continue
        listed = by_check.get(scenario, set())
        for c in failing:
            entry = f"{scenario}:{c['id']}"
            if c["id"] in listed:
                r["expected"].append(entry)
            else:
                r["unexpected"].append(entry if listed else scenario)
        status = {c["id"]: c["status"] for c in checks}
        for cid in sorted(listed):
            if status.get(cid) == "SUCCESS":
                r["stale"].append(f"{scenario}:{cid}")
            elif status.get(cid) not in FAILING:
                r["inert"].append(f"{scenario}:{cid} ({status.get(cid, 'absent')})")
    r["unexpected"] = list(dict.fromkeys(r["unexpected"]))
    return r


def all_skipped(checks: list[dict]) -> bool:
    """The suite judged nothing in this scenario (e.g. one pending its rewrite)."""
    return bool(checks) and all(c["status"] == "SKIPPED" for c in checks)


def why(check: dict) -> str:
    msg = (check.get("errorMessage") or check.get("description") or "").replace("\n", " ").strip()
    return re.sub(r"\s+", " ", msg)[:110]


def suggest(scored: list[str], results: dict[str, list[dict]], baseline: Baseline) -> Baseline:
    """A baseline that matches `results`, keeping the reasons of entries that still apply."""
    reasons = dict(baseline.entries)
    entries: list[tuple[str, str]] = []
    for scenario in scored:
        checks = results.get(scenario)
        if checks is None:
            if scenario in reasons:
                entries.append((scenario, reasons[scenario]))
            continue
        failing = [c for c in checks if c["status"] in FAILING]
        if not failing:
            continue
        if scenario in reasons:
            entries.append((scenario, reasons[scenario]))
            continue
        own = [c for c in checks if c["id"] != SCHEMA_CHECK and c["status"] != "SKIPPED"]
        kept = [c for c in failing if f"{scenario}:{c['id']}" in reasons]
        schema_ok = all(c["status"] not in FAILING for c in checks if c["id"] == SCHEMA_CHECK)
        if not kept and schema_ok and own and all(c["status"] in FAILING for c in own):
            # Every check of its own fails (typically: a fixture it needs is missing).
            entries.append((scenario, f"TODO: {why(failing[0])}"))
            continue
        for c in failing:
            entry = f"{scenario}:{c['id']}"
            entries.append((entry, reasons.get(entry) or f"TODO: {c['status']}: {why(c)}"))
    return Baseline(baseline.header, entries)


# -- commands -----------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["check", "report", "update"])
    ap.add_argument("--set", required=True)
    ap.add_argument("--scored", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--results")
    ap.add_argument("--suite-rc", type=int, default=0)
    ap.add_argument("--print-suggested", action="store_true")
    ap.add_argument("--write-suggested")
    a = ap.parse_args()
    scored, unscored = scored_scenarios(a.scored)

    try:
        baseline = Baseline.load(a.baseline)
        problems = baseline.problems(scored, unscored)
    except (OSError, ValueError) as err:
        if a.command != "update":
            print(f"  baseline {a.baseline}: {err}")
            print(f"baseline {a.set}: unreadable" if a.command == "check"
                  else f"conformance {a.set}: FAILED (unreadable baseline)")
            return 1
        baseline, problems = Baseline([], []), []

    if a.command == "check":
        for p in problems:
            print(f"  baseline {a.baseline}: {p}")
        print(f"baseline {a.set}: {len(baseline.entries)} entries, "
              f"{'OK' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0

    if not a.results:
        ap.error("--results is required")
    results = load_results(a.results)
    r = compare(scored, results, baseline)
    suggested = suggest(scored, results, baseline)
    if a.write_suggested:
        pathlib.Path(a.write_suggested).write_text(suggested.render())

    if a.command == "update":
        old = {e for e, _ in baseline.entries}
        new = {e for e, _ in suggested.entries}
        pathlib.Path(a.baseline).write_text(suggested.render())
        for e in sorted(old - new):
            print(f"  - removed {e}")
        for e in sorted(new - old):
            print(f"  + added   {e}   (write its reason)")
        todo = sum(reason.startswith("TODO") for _, reason in suggested.entries)
        print(f"baseline {a.set}: wrote {a.baseline}: {len(new)} entries "
              f"({len(new - old)} added, {len(old - new)} removed, {todo} with a TODO reason)")
        return 0

    print(f"  passed ({len(r['passed'])}): {' '.join(r['passed']) or '-'}")
    print(f"  failed ({len(r['failed'])}): {' '.join(r['failed']) or '-'}")
    if r["skipped"]:
        print(f"  skipped by the suite ({len(r['skipped'])}): {' '.join(r['skipped'])}")
    ran = [s for s in unscored if s in results]
    if ran:
        bad = [s for s in ran if any(c["status"] in FAILING for c in results[s])]
        idle = [s for s in ran if s not in bad and all_skipped(results[s])]
        idle_note = f", {len(idle)} skipped by the suite ({' '.join(idle)})" if idle else ""
        print(f"  not scored (for information): {len(ran) - len(bad) - len(idle)} of {len(ran)} pass"
              f"{idle_note}; failing: {' '.join(bad) or '-'}")
    for key, label in (("unexpected", "UNEXPECTED failure (not in the baseline)"),
                       ("stale", "STALE baseline entry (now passes: remove it)"),
                       ("inert", "baseline entry that matched nothing (remove it)")):
        for item in r[key]:
            print(f"  {label}: {item}")
    for p in problems:
        print(f"  baseline problem: {p}")
    for scenario in r["missing"]:
        print(f"  no result for scenario {scenario}")
    ok = not (r["unexpected"] or r["stale"] or r["inert"] or problems or a.suite_rc)
    if a.suite_rc and not (r["unexpected"] or r["stale"] or r["inert"] or problems):
        print(f"  the suite exited {a.suite_rc} although the results match the baseline: see its console")
    if a.print_suggested or not ok:
        print(f"  -- failing scenario/check ids of {a.set} in baseline format "
              f"(`run.sh --update-baseline` writes this with reasons kept) --")
        for line in suggested.render().splitlines():
            if not line.startswith("#"):
                print(f"  {line}")
    skipped = f"{len(r['skipped'])} skipped by the suite, " if r["skipped"] else ""
    print(f"conformance {a.set}: {'OK' if ok else 'FAILED'}: {len(r['passed'])} of {len(scored)} scored "
          f"scenarios pass; {skipped}{len(r['expected'])} expected failures, {len(r['unexpected'])} unexpected, "
          f"{len(r['stale']) + len(r['inert'])} stale")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
