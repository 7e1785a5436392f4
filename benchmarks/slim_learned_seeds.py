"""The learned Slim router over training seeds, beside the best rule of every scenario.

Run: ``.venv/bin/python benchmarks/slim_learned_seeds.py RULES_DIR SEED_DIR [SEED_DIR ...]
[--out FILE.json] [--select [--incumbent SEED_DIR]]``

``RULES_DIR`` is a ``hetsched slim experiment --scenarios ... --routers <rules>`` output folder;
each ``SEED_DIR`` one of ``--routers learned --router-checkpoint learned=<seed's learned.pt>`` on
the same scenarios and evaluation seeds. A router trained with another seed is another router, so
one training seed's figure says little: here each training seed's mean over the evaluation seeds
is one replicate, and the table gives mean ± 95 % CI over training seeds (Student's t,
:func:`hetsched.core.metrics.mean_and_ci95`).

The best rule of a scenario is the one with the highest SLO attainment, and among rules within
0.1 point of it the most accurate (the README's choice). The verdict: ``matches`` when the learned
router's mean attainment is at least the rule's or the two 95 % intervals overlap, ``loses``
otherwise; the accuracy difference is the learned mean less the rule's
(:mod:`hetsched.slim.experiments.learned_vs_rules`).

With ``--select`` (on experiments over *tuning* seeds, e.g. ``--seeds 100,101,102,103,104``) it
also scores each training run as training keeps its best checkpoint (attainment + half the
accuracy, less four times the attainment short of each scenario's best rule; held-out scenarios
and ``paper`` take no part) and names the run to ship,
so the evaluation seeds never take part in the choice. Beside each other run it prints the
chosen run's lead with a 95 % interval from resampling the seeds (a paired bootstrap,
:func:`~hetsched.slim.experiments.learned_vs_rules.score_lead_interval`): "tie" when the
interval reaches 0, i.e. the choice between those two says nothing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hetsched.core.entry import run_reporting_user_errors
from hetsched.core.errors import DataError
from hetsched.core.metrics import mean_and_ci95
from hetsched.slim.experiments.learned_vs_rules import (
    best_rule,
    keep_or_replace,
    matches_on_attainment,
    run_score,
    score_lead_interval,
    select_run,
)


def _results(folder: Path) -> dict[str, dict[str, Any]]:
    """scenario -> {held_out, routers} of one experiment folder's ``results.json``.

    Raises:
        DataError: For a missing, unreadable or malformed file.
    """
    path = folder / "results.json"
    try:
        document = json.loads(path.read_text())
        return {entry["scenario"]: entry for entry in document["results"]}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DataError(f"{path}: not a `hetsched slim experiment` result ({error})") from None


def _learned(run: dict[str, dict[str, Any]], scenario: str, folder: Path) -> dict[str, Any]:
    """The ``learned`` router's summary on ``scenario`` in one training run's results.

    Raises:
        DataError: If the run has no such scenario or no learned router on it.
    """
    try:
        return run[scenario]["routers"]["learned"]
    except KeyError:
        raise DataError(f"{folder}: no 'learned' router on scenario {scenario!r}") from None


def summarise(rules_dir: Path, seed_dirs: list[Path]) -> list[dict[str, Any]]:
    """One row per scenario: the best rule, the learned router over training seeds, verdict."""
    rules = _results(rules_dir)
    seeds = [_results(folder) for folder in seed_dirs]
    rows = []
    for scenario, entry in rules.items():
        name, rule = best_rule(entry["routers"])
        pairs = zip(seeds, seed_dirs, strict=True)
        learned = [_learned(runs, scenario, folder) for runs, folder in pairs]
        attainment = [100 * one["slo_attainment"]["mean"] for one in learned]
        accuracy = [one["accuracy_pct"]["mean"] for one in learned]
        att_mean, att_ci = mean_and_ci95(attainment)
        acc_mean, acc_ci = mean_and_ci95(accuracy)
        rule_att = 100 * rule["slo_attainment"]["mean"]
        rule_ci = 100 * rule["slo_attainment"]["ci95"]
        pooled = {"slo_attainment": {"mean": att_mean / 100, "ci95": att_ci / 100}}
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
                "verdict": "matches" if matches_on_attainment(pooled, rule) else "loses",
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


def selection(rules_dir: Path, seed_dirs: list[Path], incumbent: Path | None = None) -> str:
    """Each training run's score for the choice
    (:func:`~hetsched.slim.experiments.learned_vs_rules.run_score`) and the one chosen; with
    ``incumbent`` (one of ``seed_dirs``: the router shipped now) the best run replaces it only
    if its lead's interval lies above 0 (:func:`keep_or_replace`).

    Raises:
        DataError: If ``incumbent`` is not one of ``seed_dirs``.
    """
    rules = _results(rules_dir)
    runs = [_results(folder) for folder in seed_dirs]
    chosen = select_run(runs, rules)
    verdict = ""
    if incumbent is not None:
        if incumbent not in seed_dirs:
            raise DataError(f"--incumbent {incumbent} is not one of the training runs given")
        kept = seed_dirs.index(incumbent)
        chosen_now, _ = keep_or_replace(runs, rules, kept)
        if chosen_now == kept and chosen != kept:
            verdict = f" (the best, {seed_dirs[chosen]}, ties the incumbent: it stays)"
        chosen = chosen_now
    lines = [
        "| training run | selection score | chosen run's lead [95 % interval, seeds resampled] |",
        "| --- | ---: | --- |",
    ]
    for index, (folder, run) in enumerate(zip(seed_dirs, runs, strict=True)):
        lead = "(chosen)"
        if index != chosen:
            low, high = score_lead_interval(runs[chosen], run, rules)
            lead = f"[{low:+.4f}, {high:+.4f}]" + (" tie" if low <= 0.0 else "")
        lines.append(f"| {folder} | {run_score(run, rules):.4f} | {lead} |")
    lines.append(f"\nchosen: {seed_dirs[chosen]}{verdict}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rules", type=Path, help="experiment folder of the rules")
    parser.add_argument("seeds", type=Path, nargs="+", help="experiment folder per training seed")
    parser.add_argument("--out", type=Path, default=None, help="also write the rows as JSON")
    parser.add_argument(
        "--select",
        action="store_true",
        help="also choose one training run (run this on tuning seeds, not the evaluation seeds)",
    )
    parser.add_argument(
        "--incumbent",
        type=Path,
        default=None,
        help="with --select: the run of the router shipped now (one of SEED_DIR); it stays"
        " unless the best run's lead over it has a 95 %% interval above 0",
    )
    args = parser.parse_args()
    rows = summarise(args.rules, args.seeds)
    print(markdown(rows, len(args.seeds)))
    if args.select:
        print()
        print(selection(args.rules, args.seeds, args.incumbent))
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    run_reporting_user_errors(main)
