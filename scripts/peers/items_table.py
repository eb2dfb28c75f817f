#!/usr/bin/env python3
"""Recall@k and whole-evidence coverage from a `submem bench` run's items.jsonl,
split into conversation groups, so one run answers "does it hold beyond
conv-26?".

    python3 scripts/peers/items_table.py bench-out/X/items.jsonl \
        --group conv-26 --skip-category 5 [--mean-over-conversations]

Rows are substrates, columns are budgets; each cell is R@k / coverage over the
questions with gold evidence. `--group NAME` (repeatable) puts that
conversation in its own column group; the rest form "others". With
`--folds`, it also prints each conversation's coverage so the spread across
conversations is visible.
"""

import argparse
import collections
import json
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("items")
    ap.add_argument("--group", action="append", default=[])
    ap.add_argument("--skip-category", action="append", default=[], type=str,
                    help="category prefixes to leave out, e.g. 5")
    ap.add_argument("--folds", action="store_true", help="print per-conversation coverage")
    args = ap.parse_args()
    cells = collections.defaultdict(lambda: [0.0, 0, 0, 0])  # r sum, n, whole, gold
    per_conv = collections.defaultdict(lambda: [0, 0])
    budgets, subs = set(), []
    for line in open(args.items, encoding="utf-8"):
        d = json.loads(line)
        if d.get("gold_evidence", 0) == 0:
            continue
        if any(str(d.get("category", "")).startswith(c + ":") for c in args.skip_category):
            continue
        group = d["conversation"] if d["conversation"] in args.group else "others"
        key = (d["substrate"], group, d["budget"])
        c = cells[key]
        if d.get("recall_at_k") is not None:
            c[0] += d["recall_at_k"]
            c[1] += 1
        cov = d.get("coverage") or {}
        c[2] += cov.get("whole", 0)
        c[3] += cov.get("gold", 0)
        pc = per_conv[(d["substrate"], d["budget"], d["conversation"])]
        pc[0] += cov.get("whole", 0)
        pc[1] += cov.get("gold", 0)
        budgets.add(d["budget"])
        if d["substrate"] not in subs:
            subs.append(d["substrate"])
    groups = [g for g in args.group] + ["others"]
    budgets = sorted(budgets)
    for g in groups:
        print(f"\n## {g}: R@k / whole-evidence coverage")
        print("| substrate | n | " + " | ".join(f"{b}" for b in budgets) + " |")
        print("|---|---:|" + "---:|" * len(budgets))
        for s in subs:
            row = []
            n = 0
            for b in budgets:
                r, cnt, whole, gold = cells.get((s, g, b), [0, 0, 0, 0])
                n = max(n, cnt)
                row.append(f"{r / cnt:.3f} / {whole / gold:.3f}" if cnt and gold else "—")
            if n:
                print(f"| {s} | {n} | " + " | ".join(row) + " |")
    if args.folds:
        print("\n## coverage per conversation (mean ± sd over conversations)")
        for s in subs:
            for b in budgets:
                vals = {conv: w / g for (ss, bb, conv), (w, g) in per_conv.items() if ss == s and bb == b and g}
                if len(vals) > 1:
                    print(f"{s:40} {b:6} mean {statistics.mean(vals.values()):.3f} sd {statistics.stdev(vals.values()):.3f}  "
                          + " ".join(f"{k[-2:]}:{v:.2f}" for k, v in sorted(vals.items())))


if __name__ == "__main__":
    main()
