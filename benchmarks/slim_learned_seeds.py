"""The learned Slim router over training seeds, beside the best rule of every scenario.

Run: ``.venv/bin/python benchmarks/slim_learned_seeds.py RULES_DIR SEED_DIR [SEED_DIR ...]
[--out FILE.json]``

``RULES_DIR`` is a ``hetsched slim experiment --scenarios ... --routers <rules>`` output folder;
each ``SEED_DIR`` one of ``--routers learned --router-checkpoint learned=<seed's learned.pt>`` on
the same scenarios and evaluation seeds. A router trained with another seed is another router, so
one training seed's figure says little: here each training seed's mean over the evaluation seeds
is one replicate, and the table gives mean ± 95 % CI over training seeds (Student's t,
:func:`hetsched.core.metrics.mean_and_ci95`).

The best rule of a scenario is the one with the highest SLO attainment, and among rules within
0.1 point of it the most accurate (the README's choice). The verdict: ``matches`` when the learned
router's mean attainment is at least the rule's or the two 95 % intervals overlap, ``loses``
otherwise; the accuracy difference is the learned mean less the rule's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hetsched.core.metrics import mean_and_ci95

TIE_POINTS = 0.1
"""Rules within this many points of the highest attainment count as tied on attainment."""


def _results(folder: Path) -> dict[str, dict[str, Any]]:
    """scenario -> {held_out, routers} of one experiment folder's ``results.json``."""
    document = json.loads((folder / "results.json").read_text())
    return {entry["scenario"]: entry for entry in document["results"]}


def best_rule(routers: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The rule with the highest attainment; among rules within :data:`TIE_POINTS` of it, the
    most accurate."""
    top = max(entry["slo_attainment"]["mean"] for entry in routers.values())
    tied = {
        name: entry
        for name, entry in routers.items()
        if 100 * (top - entry["slo_attainment"]["mean"]) <= TIE_POINTS
    }
    name = max(tied, key=lambda key: tied[key]["accuracy_pct"]["mean"])
    return name, routers[name]


def summarise(rules_dir: Path, seed_dirs: list[Path]) -> list[dict[str, Any]]:
    """One row per scenario: the best rule, the learned router over training seeds, verdict."""
    rules = _results(rules_dir)
    seeds = [_results(folder) for folder in seed_dirs]
    rows = []
    for scenario, entry in rules.items():
        name, rule = best_rule(entry["routers"])
        learned = [runs[scenario]["routers"]["learned"] for runs in seeds]
        attainment = [100 * one["slo_attainment"]["mean"] for one in learned]
        accuracy = [one["accuracy_pct"]["mean"] for one in learned]
        att_mean, att_ci = mean_and_ci95(attainment)
        acc_mean, acc_ci = mean_and_ci95(accuracy)
        rule_att = 100 * rule["slo_attainment"]["mean"]
        rule_ci = 100 * rule["slo_attainment"]["ci95"]
        overlap = att_mean + att_ci >= rule_att - rule_ci
        rows.append(
            {
                "scenario": scenario,
                "held_out": entry["held_out"],
                "best_rule": name,
                "rule_attainment_pct": rule_att,
                "rule_attainment_ci95": rule_ci,
                "rule_accuracy_pct": rule["accuracy_pct"]["mean"],
                "learned_attainment_pct": att_mean,
                "learned_attainment_ci95": att_ci,
                "learned_accuracy_pct": acc_mean,
                "learned_accuracy_ci95": acc_ci,
                "attainment_per_seed": attainment,
                "accuracy_per_seed": accuracy,
                "verdict": "matches" if att_mean >= rule_att or overlap else "loses",
                "accuracy_vs_rule": acc_mean - rule["accuracy_pct"]["mean"],
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]], seeds: int) -> str:
    """The rows as a Markdown table (attainment % / accuracy %)."""
    lines = [
        f"| scenario | best rule | its SLO % / accuracy % | learned, {seeds} training seeds:"
        " SLO % / accuracy % | per seed SLO % | verdict | accuracy vs rule |",
        "| --- | --- | --- | --- | --- | --- | ---: |",
    ]
    for row in rows:
        held = " (held out)" if row["held_out"] else ""
        per_seed = ", ".join(f"{value:.2f}" for value in row["attainment_per_seed"])
        lines.append(
            f"| {row['scenario']}{held} | {row['best_rule']} |"
            f" {row['rule_attainment_pct']:.2f} ± {row['rule_attainment_ci95']:.2f} /"
            f" {row['rule_accuracy_pct']:.2f} |"
            f" {row['learned_attainment_pct']:.2f} ± {row['learned_attainment_ci95']:.2f} /"
            f" {row['learned_accuracy_pct']:.2f} ± {row['learned_accuracy_ci95']:.2f} |"
            f" {per_seed} | {row['verdict']} | {row['accuracy_vs_rule']:+.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rules", type=Path, help="experiment folder of the rules")
    parser.add_argument("seeds", type=Path, nargs="+", help="experiment folder per training seed")
    parser.add_argument("--out", type=Path, default=None, help="also write the rows as JSON")
    args = parser.parse_args()
    rows = summarise(args.rules, args.seeds)
    print(markdown(rows, len(args.seeds)))
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
