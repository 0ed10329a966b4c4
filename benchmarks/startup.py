"""Engine init seconds, cold and warm: stock CPU, both template compile stages, the fused model.

Cold: a fresh compile cache. Warm: a second start on the same cache. All
variants in one run, side by side::

    python benchmarks/startup.py --size tiny [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any

from _common import init_seconds, machine, print_table

VARIANTS = ("stock", "template-fusion_only", "template-graph", "template-fused-model")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="tiny", choices=("tiny", "small"))
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for variant in VARIANTS:
        root = tempfile.mkdtemp(prefix=f"startup-{variant}-")
        spec = {"variant": variant, "size": args.size}
        cold = init_seconds(spec, cache_root=root)
        warm = init_seconds(spec, cache_root=root)
        rows.append(
            {
                "variant": variant,
                "cold_init_s": cold,
                "warm_init_s": warm,
                "warm/cold": round(warm / cold, 2),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    print(f"\nmachine: {machine()}; model {args.size}\n")
    print_table(rows, ["variant", "cold_init_s", "warm_init_s", "warm/cold"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "size": args.size, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
