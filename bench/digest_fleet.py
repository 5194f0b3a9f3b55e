"""The digest at fleet scale (issue 37): 4, 40 and 400 hosts, built, ranked and drawn.

A deterministic fleet day (``tests/fixtures/fleet_day.py``): most hosts busy; some hold
VRAM idle for hours; some have a disk filling within the day, a few are at 95 % already;
a few Slurm nodes drained for more than a day; a few hosts with failed actions. Samples
every ``--step`` seconds (600 by default; the scheduler samples every 60 s, the heatmap
reads the same either way).

For each size: the digest built from the samples (pure model, no Redis: the Redis read is
``digest_bench.py``'s row), its chart drawn (lines per host up to 8 hosts, the fleet's
heatmaps beyond), the message checked against Block Kit's limits, and every host checked
to be in the message by name or in an "N of M shown" count. ``--pictures DIR`` keeps the
PNGs (``docs/digest-4.png``, ``-40``, ``-400``).

Run: python bench/digest_fleet.py [--hosts 4,40,400] [--pictures docs] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.chat.blockkit import to_blocks
from bot.digest.build import build_digest
from bot.digest.fleet_chart import digest_chart
from bot.digest.model import DigestSettings
from bot.digest.render import render_digest
from tests.fixtures.fleet_day import T0, fleet


def one(n: int, step: float, pictures: Path | None) -> dict[str, Any]:
    series, incidents, drained = fleet(n, step)
    start = time.perf_counter()
    digest = build_digest(T0, T0 + 86400, series, incidents, drained=drained,
                          cfg=DigestSettings())
    built = time.perf_counter() - start
    message = render_digest(digest)
    blocks = to_blocks(message)
    words = json.dumps(blocks, ensure_ascii=False)
    named = sum(1 for h in series if re.search(rf"\b{re.escape(h)}\b", words))
    counted = re.findall(r"(\d+) of (\d+) (?:hosts )?shown", words)
    out = Path(pictures or tempfile.mkdtemp(prefix="ib-digest-")) / f"digest-{n}.png"
    start = time.perf_counter()
    digest_chart(digest, series, out)
    drawn = time.perf_counter() - start
    return {"hosts": n, "build_s": built, "chart_s": drawn, "blocks": len(blocks),
            "text_chars": len(words), "needs": len(digest.needs), "named": named,
            "cut_said": bool(counted) or named == n, "png": str(out),
            "png_kib": out.stat().st_size / 1024,
            "points": sum(len(p) for s in series.values() for p in s.values())}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", default="4,40,400")
    ap.add_argument("--step", type=float, default=600.0)
    ap.add_argument("--pictures", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    rows = []
    for n in (int(x) for x in args.hosts.split(",")):
        r = one(n, args.step, args.pictures)
        rows.append(r)
        print(f"{n:4d} hosts: build {r['build_s']:.2f} s, chart {r['chart_s']:.2f} s "
              f"({r['png_kib']:.0f} KiB, {r['png']}); message {r['blocks']} blocks, "
              f"{r['needs']} hosts need a person, {r['named']} named; cut said: "
              f"{r['cut_said']}", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"sizes": rows, "step_s": args.step}, indent=2))


if __name__ == "__main__":
    main()
