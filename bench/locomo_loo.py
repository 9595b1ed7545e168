"""Leave-one-conversation-out check of the fusion weights tuned on LoCoMo's development split.

The ``FusionConfig`` defaults were chosen on the five development conversations, and the held-out
five are measured independently, so this asks whether the choice would have held on a
conversation it was not made on. It runs bench/locomo.py with a grid around each tuned weight
(one weight moved at a time, every other at its default; all over the same ingested graph) and
then, for each conversation, picks the setting with the best recall@10 on the other four (pooled
over their questions; the default wins ties) and reports that setting's recall on the held-out
conversation against the default's. If the defaults were overfit, the settings picked without a
conversation would beat the default on it; if they are not, the picks are mostly the default or
its neighbours and the held-out difference is about zero.

    python -m bench.locomo_loo --data ../shared/data/locomo/locomo-dev.json

writes ``bench/results/locomo_loo.{md,json}`` (the bench's own tables plus the LOO table).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from bench import locomo
from cairn.memory.dossiers.facts import FusionConfig

DEFAULT = FusionConfig()
# The weights tuned on the development split (bench/results/locomo.md, locomo_sweep.md) and the
# values tried for each, the default among them.
GRID: dict[str, tuple[Any, ...]] = {
    "text_weight": (0.5, 0.75, 1.0, 1.25, 1.5),
    "neighbour_weight": (0.0, 0.15, 0.3, 0.45),
    "neighbour_window": (1, 3, 6),
    "seeds": (5, 10, 20),
    "name_weight": (0.0, 0.125, 0.25, 0.5),
    "content_weight": (0.0, 0.5, 1.0, 1.5),
    "centre": (0.0, 0.5, 1.0),
    "dossier_weight": (0.0, 0.05, 0.1, 0.2),
    "dossier_seeds": (3, 5, 10),
    "fusion": ("score", "rrf"),
    "distinct_sources": (True, False),
    "when_mates": (False, True),
}


# The defaults again, searched like every grid variant (the question's vector handed in, embedded
# once for all of them), so the LOO compares like with like; "cairn" embeds its own (timed).
REFERENCE = "loo_default"


def grid(base: FusionConfig = DEFAULT) -> dict[str, FusionConfig]:
    """``cairn`` and ``REFERENCE`` (the defaults) and one variant per non-default value in ``GRID``."""
    out = {"cairn": base, REFERENCE: base}
    for weight, values in GRID.items():
        for value in values:
            if value != getattr(base, weight):
                out[f"loo_{weight}={value}"] = replace(base, **{weight: value})
    return out


@dataclass(frozen=True)
class Fold:
    held_out: str
    picked: str  # the setting best on the other conversations
    picked_recall: float  # its recall on the held-out conversation
    default_recall: float
    # per tuned weight: the value picked on the other conversations (the default if none beat it)
    weights: dict[str, Any]


def pooled(per: Sequence[dict[str, Any]], system: str, k: str, category: str) -> float:
    """Mean recall over the questions of ``per``'s conversations (each conversation's mean
    weighted by its number of questions in ``category``)."""
    total = sum(c["questions_by_category"].get(category, 0) for c in per)
    if not total:
        return 0.0
    return (
        sum(
            c["recall"][system][k].get(category, 0.0) * c["questions_by_category"].get(category, 0)
            for c in per
        )
        / total
    )


def weight_of(name: str) -> str | None:
    """The tuned weight a ``grid`` variant moves (None: the default)."""
    return name.removeprefix("loo_").split("=")[0] if name.startswith("loo_") and "=" in name else None


def leave_one_out(
    per: Sequence[dict[str, Any]], systems: Sequence[str], k: str = "10", category: str = "all"
) -> list[Fold]:
    """For each conversation, the system among ``systems`` with the best pooled recall on the
    others (``REFERENCE``, the default, wins ties, then the order given), with its recall on the
    held-out one; and, per tuned weight, the value best on the others with the rest at default."""
    order = [REFERENCE, *(s for s in systems if s != REFERENCE)]
    folds = []
    for held in per:
        rest = [c for c in per if c is not held]
        score = {s: pooled(rest, s, k, category) for s in order}
        picked = max(order, key=lambda s: (score[s], -order.index(s)))
        weights: dict[str, Any] = {}
        for weight in dict.fromkeys(w for s in order if (w := weight_of(s))):
            moved = [REFERENCE, *(s for s in order if weight_of(s) == weight)]
            best = max(moved, key=lambda s: (score[s], -moved.index(s)))
            weights[weight] = getattr(DEFAULT, weight) if best == REFERENCE else best.split("=", 1)[1]
        folds.append(
            Fold(
                held["sample_id"],
                picked,
                held["recall"][picked][k].get(category, 0.0),
                held["recall"][REFERENCE][k].get(category, 0.0),
                weights,
            )
        )
    return folds


def loo_lines(data: dict[str, Any]) -> list[str]:
    """The LOO tables: per held-out conversation, the setting picked on the other four and its
    recall there against the default's, at k=10 overall, k=10 multi-hop and k=25."""
    per = data["per_conversation"]
    systems = list(data["recall"])
    systems = [s for s in systems if s.startswith("loo_")]
    lines = [
        "",
        "## Leave one conversation out",
        "",
        "Per conversation: the setting (one tuned weight moved, the rest at default) with the best pooled "
        "recall on the other four, and its recall on the held-out conversation against the default's "
        f"(`FusionConfig()`: {', '.join(f'{w}={getattr(DEFAULT, w)}' for w in GRID)}).",
    ]
    for k, category, title in (
        ("10", "all", "recall@10"),
        ("10", "1", "multi-hop @10"),
        ("25", "all", "recall@25"),
    ):
        folds = leave_one_out(per, systems, k, category)
        n = [c["questions_by_category"].get(category, 0) for c in per]
        mean_picked = sum(f.picked_recall * w for f, w in zip(folds, n, strict=True)) / max(1, sum(n))
        mean_default = sum(f.default_recall * w for f, w in zip(folds, n, strict=True)) / max(1, sum(n))
        lines += [
            "",
            f"### {title}",
            "",
            "| held out | picked on the other four | its recall there | default's | difference |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {f.held_out} | `{f.picked}` | {f.picked_recall:.3f} | {f.default_recall:.3f} | "
            f"{f.picked_recall - f.default_recall:+.3f} |"
            for f in folds
        ]
        lines.append(
            f"| pooled | | {mean_picked:.3f} | {mean_default:.3f} | {mean_picked - mean_default:+.3f} |"
        )
        lines += [
            "",
            "Per weight, the value best on the other four (the rest at default):",
            "",
            "| held out | " + " | ".join(folds[0].weights) + " |",
            "|---|" + "---|" * len(folds[0].weights),
        ]
        lines += [f"| {f.held_out} | " + " | ".join(str(v) for v in f.weights.values()) + " |" for f in folds]
    return lines


def main(argv: list[str] | None = None) -> dict[str, Any]:
    variants = grid()
    names = ",".join(variants)
    args = list(argv) if argv is not None else None
    if args is None:
        import sys

        args = sys.argv[1:]
    if not any(a.startswith("--variants") for a in args):
        args += ["--variants", names]
    return locomo.main(args, variants=variants, results="locomo_loo", extra=loo_lines)


assert {f.name for f in fields(FusionConfig)} >= set(GRID), "GRID names a weight FusionConfig lacks"

if __name__ == "__main__":
    main()
