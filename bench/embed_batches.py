"""The local model's CPU a text when texts of unlike length arrive together, as the hub's concurrent clients
and a recall's queries send them: real LoCoMo turns (`[date] Speaker: text`, as they are stored) and questions
(as they are searched) from the development split, shuffled into groups of 32, each group embedded in one
`encode` call. The same groups two ways in one run, each going first in every other round: each cut into
batches of like length (`_minilm.batches`, the default) against the texts sorted by length in batches of 64,
every text padded to its batch's longest (how `encode` batched before, for groups of up to 64: it sorted by
characters, which orders only larger calls differently). Printed: CPU milliseconds a text (the model's threads
included), the padding each way, the ratio, and whether every vector came out the same both ways.

Run: .venv/bin/python bench/embed_batches.py [--data ../shared/eval/locomo-dev] [--group 32] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import numpy as np

from frobozz.memory import MemorySettings, _minilm


def texts(data: Path) -> list[str]:
    """Every turn as the quality bench stores it, and every question, from each conversation of the split."""
    found = []
    for path in sorted(data.glob("*.json")):
        d = json.loads(path.read_text(encoding="utf-8"))
        n = 1
        while f"session_{n}" in d:
            date = d[f"session_{n}_date_time"]
            found += [f"[{date}] {t['speaker']}: {t['text']}" for t in d[f"session_{n}"]]
            n += 1
        found += [qa["question"] for qa in d["qa"]]
    return found


def padded_by_64(lengths: list[int]) -> list[list[int]]:
    """How `encode` batched before: sorted by length, in batches of 64."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    return [order[i : i + _minilm.BATCH] for i in range(0, len(order), _minilm.BATCH)]


def main(data: Path, group: int, rounds: int) -> None:
    model = _minilm.load(MemorySettings().cache_dir, threads=1)  # one thread: CPU time is the model's work alone
    every = texts(data)
    random.Random(36).shuffle(every)
    groups = [every[i : i + group] for i in range(0, len(every), group)][:150]
    counts = [[sum(e.attention_mask) for e in model._tokenizer.encode_batch(g)] for g in groups]
    real = sum(map(sum, counts))
    print(f"{len(every)} texts of the development split, {len(groups)} groups of {group}; {real} tokens in all")
    ways = {"like length (now)": _minilm.batches, "padded by 64 (before)": padded_by_64}
    cpu: dict[str, list[float]] = {name: [] for name in ways}
    vectors: dict[str, list[np.ndarray]] = {}
    model.encode(groups[0])  # warm
    try:
        for round_ in range(rounds):
            for name, way in list(ways.items())[:: 1 if round_ % 2 == 0 else -1]:  # each goes first in turn
                _minilm.batches = way  # the one place `encode` asks how to batch
                started = time.process_time()
                vectors[name] = [model.encode(g) for g in groups]
                cpu[name].append(1000 * (time.process_time() - started) / sum(map(len, groups)))
    finally:
        _minilm.batches = ways["like length (now)"]
    for name, way in ways.items():
        runs = [way(c) for c in counts]
        padded = sum(len(run) * max(c[i] for i in run) for c, rs in zip(counts, runs, strict=True) for run in rs)
        print(
            f"  {name:22} CPU {statistics.median(cpu[name]):5.2f} ms a text (median of {rounds}: "
            f"{', '.join(f'{c:.2f}' for c in cpu[name])}); {sum(map(len, runs))} model runs, "
            f"padding {padded / real - 1:.0%} of the tokens"
        )
    now, before = (statistics.median(cpu[name]) for name in ways)
    same = all(np.array_equal(a, b) for a, b in zip(*vectors.values(), strict=True))
    print(f"like length against padded by 64: {now / before:.2f}x the CPU a text; the same vectors: {same}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).parents[2] / "shared" / "eval" / "locomo-dev")
    parser.add_argument("--group", type=int, default=32, help="texts that arrive together (one encode call)")
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    main(arguments.data, arguments.group, arguments.rounds)
