"""Read p50 from Python against the same reads from Rust.

    python crates/python/bench/read_p50.py [--events 2000] [--budget 1024] [--rounds 3]

Generates one conversation (seeded), writes it into each substrate from
Python and from Rust (`examples/read_p50.rs`, built in the same cargo profile
as the installed extension: pass --release when the package was installed
with `pip install`, leave it off after `maturin develop`), asks the same
questions in the same order, and prints each side's p50 and their ratio.
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import submem

ROOT = Path(__file__).resolve().parents[3]
PEOPLE = ["Ana", "Ben", "Carla", "Dev", "Emma", "Femi"]
THINGS = ["cello", "bicycle", "garden", "novel", "kayak", "bakery", "telescope", "marathon", "violin", "camera"]
PLACES = ["Lisbon", "Porto", "Kyoto", "Oslo", "Lima", "Accra", "Quito", "Hanoi"]
VERBS = ["bought", "repaired", "sold", "painted", "borrowed", "lost", "found", "photographed"]


def conversation(n, seed=7):
    rng = random.Random(seed)
    events, questions = [], []
    for i in range(n):
        who, what, where, verb = rng.choice(PEOPLE), rng.choice(THINGS), rng.choice(PLACES), rng.choice(VERBS)
        text = f"Last week I {verb} a {what} in {where} with my friend {rng.choice(PEOPLE)}."
        events.append(
            {"kind": "turn", "session_id": f"s{i // 25}", "speaker": who, "text": text, "source_id": f"D{i // 25}:{i % 25}"}
        )
        if i % 20 == 0:
            questions.append(f"What did {who} do with the {what} in {where}?")
    return events, questions


def python_p50(spec, events, questions, budget, rounds):
    memory = submem.Memory(spec, memory_llm="none")
    memory.write(events)
    memory.read(questions[0], budget=budget)
    times = []
    for _ in range(rounds):
        for q in questions:
            t = time.perf_counter()
            memory.read(q, budget=budget)
            times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times), len(times)


def rust_p50(spec, data_path, budget, rounds, release):
    cmd = ["cargo", "run", "-q", "-p", "submem-python", "--example", "read_p50"]
    if release:
        cmd.append("--release")
    cmd += ["--", str(data_path), spec, str(budget), str(rounds)]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--budget", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--release", action="store_true", help="build the Rust side with --release")
    ap.add_argument("--substrates", default="m2,m1-fill")
    args = ap.parse_args()
    events, questions = conversation(args.events)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.json"
        data.write_text(json.dumps({"events": events, "questions": questions}))
        print(f"{len(events)} events, {len(questions)} questions x {args.rounds} rounds, budget {args.budget}")
        print(f"{'substrate':<10} {'python p50 us':>14} {'rust p50 us':>12} {'ratio':>6}")
        for spec in args.substrates.split(","):
            py, n = python_p50(spec, events, questions, args.budget, args.rounds)
            rs = rust_p50(spec, data, args.budget, args.rounds, args.release)
            print(f"{spec:<10} {py:>14.1f} {rs['p50_us']:>12.1f} {py / rs['p50_us']:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
