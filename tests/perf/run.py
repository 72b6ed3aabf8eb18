"""`make bench` / `make bench-smoke`: run every tests/perf/bench_*.py, print one
table and write the JSON summary (with date and commit) to var/bench.json.

Each benchmark runs in its own process and prints its JSON as the last line.
`--smoke` runs tiny sizes so CI keeps the benchmarks from rotting; its numbers
mean nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def discover(only: list[str]) -> list[str]:
    names = sorted(path.stem for path in (ROOT / "tests" / "perf").glob("bench_*.py"))
    return [name for name in names if not only or any(o in name for o in only)]


def run_one(name: str, smoke: bool) -> dict:
    started = time.monotonic()
    print(f"--- {name}{' (smoke)' if smoke else ''}", file=sys.stderr, flush=True)
    # Benchmarks measure the production shape: PostgreSQL and Redis, as .ci/run starts them.
    env = {
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/controlplane",
        "REDIS_URL": "redis://127.0.0.1:6379/12",
        **os.environ,
    }
    done = subprocess.run(
        [sys.executable, "-m", f"tests.perf.{name}", *(["--smoke"] if smoke else [])],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        check=False,
        env=env,
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    seconds = round(time.monotonic() - started, 1)
    print(f"--- {name}: {seconds} s", file=sys.stderr, flush=True)
    if done.returncode != 0 or not lines:
        return {"benchmark": name, "error": f"exit {done.returncode}", "results": [], "seconds": seconds}
    summary = json.loads(lines[-1])
    summary["seconds"] = seconds
    return summary


def timings(summaries: list[dict], total: float) -> str:
    """Where the run's wall time went, so the slow setups stand out (`make bench` must fit in 15 min)."""
    parts = ", ".join(f"{s['benchmark']} {s.get('seconds', 0):.0f} s" for s in summaries)
    return f"Wall time {total / 60:.1f} min: {parts}"


def table(summaries: list[dict]) -> str:
    rows = [("benchmark", "metric", "value", "baseline", "ratio", "target")]
    for summary in summaries:
        if summary.get("error"):
            rows.append((summary["benchmark"], "FAILED", summary["error"], "", "", ""))
        for r in summary["results"]:
            rows.append(
                (
                    summary["benchmark"],
                    r["metric"],
                    f"{r['value']} {r['unit']}",
                    f"{r['baseline']} ({r['baseline_name']})" if r.get("baseline") is not None else "",
                    "" if r.get("ratio") is None else f"{r['ratio']}",
                    r.get("target", ""),
                )
            )
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(" | ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in rows)


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument(
        "--out", default=str(ROOT / "var" / ("bench-smoke.json" if "--smoke" in sys.argv else "bench.json"))
    )
    args = parser.parse_args()
    started = time.monotonic()
    summaries = [run_one(name, args.smoke) for name in discover(args.only)]
    total = time.monotonic() - started
    report = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "smoke": args.smoke,
        "seconds": round(total, 1),
        "benchmarks": summaries,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(
        f"\nBenchmarks {report['date']} at {report['commit']}{' (smoke: sizes too small to mean anything)' if args.smoke else ''}"
    )
    print(table(summaries))
    print(timings(summaries, total))
    print(f"\nJSON: {args.out}")
    return 1 if any(s.get("error") for s in summaries) else 0


if __name__ == "__main__":
    sys.exit(main())
