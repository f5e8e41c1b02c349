#!/usr/bin/env python3
"""Writes a small review data set for a local run: ``python sample_data.py DATA``, then
``--data s3://acme-reviews-data/train/=DATA/train --data
s3://acme-reviews-data/validation/=DATA/validation``. A review with "great" in it is positive;
one validation review in eight is labelled wrong, so no model scores an F1 of 1."""

import sys
from pathlib import Path

POSITIVE = ["great", "fine", "good", "superb"]
NEGATIVE = ["awful", "poor", "bad", "dull"]
NEUTRAL = ["film", "plot", "cast", "score", "scene", "music"]


def reviews(count: int, wrong_every: int | None) -> str:
    lines = []
    for i in range(count):
        label = i % 2
        words = [(POSITIVE if label else NEGATIVE)[i % 4], *NEUTRAL[i % 3:i % 3 + 4]]
        if wrong_every and i % wrong_every == 0:
            label = 1 - label
        lines.append(f"{label}\t{' '.join(words)}")
    return "\n".join(lines) + "\n"


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "data")
    for channel, count, wrong_every in (("train", 256, None), ("validation", 64, 8)):
        (folder / channel).mkdir(parents=True, exist_ok=True)
        (folder / channel / "reviews.tsv").write_text(reviews(count, wrong_every))
    print(f"wrote {folder}/train and {folder}/validation")


if __name__ == "__main__":
    main()
