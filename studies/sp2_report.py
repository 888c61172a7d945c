"""The SP2 study's Markdown: every world's accuracy table and leakage, and the splits beside the paper's Table 2."""
from __future__ import annotations

import math

import numpy as np

PAPER_H1 = {  # MovieLens RMSE, Table 2 of seed 001 (5-fold): only public, naive, clustering, joint
    (2.0, 2.0): (0.9183, 0.9051, 0.9165, 0.9051), (0.5, 0.5): (0.925, 0.9072, 0.9146, 0.9072),
    (5.0, 1.0): (0.9518, 0.9316, 0.9387, 0.9316), (1.0, 5.0): (0.9033, 0.8953, 0.9037, 0.8953)}


def _fmt(x) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4f}"


def markdown(result: dict) -> str:
    lines = ["# SP2 study (seed 001): accuracy and server-view leakage", ""]
    lines += [f"Seed {result['seed']}; MF {result['config']}.", ""]
    for wname, world in result["worlds"].items():
        lines += [f"## {wname}: {world['n_users']} users, {world['n_items']} items, {world['train']} training "
                  f"and {world['test']} held-out ratings", ""]
        base = world["baselines"]
        lines += [f"All public (MF on every rating): RMSE {_fmt(base['all_public']['rmse'])}, NDCG@10 "
                  f"{_fmt(base['all_public']['ndcg10'])}; all private (per-user mean): RMSE "
                  f"{_fmt(base['all_private']['rmse'])}, NDCG@10 {_fmt(base['all_private']['ndcg10'])}."]
        if "surprise_svd_rmse" in world:
            lines += [f"Base MF check, all-public split: ours {_fmt(world['ours_svd_rmse'])}, scikit-surprise SVD "
                      f"{_fmt(world['surprise_svd_rmse'])}."]
        lines += ["", "| allocation | private share | only public | naive | clustering | joint | joint, no "
                      "fine-tuning | naive gain | ε_LB full | ε_LB leaky (ceiling) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for key, row in world["allocations"].items():
            leak = result["leakage"].get(key, {})
            full, leaky = leak.get("full", {}), leak.get("leaky", {})
            cells = [f"{_fmt(row[m]['rmse'])} / {_fmt(row[m]['ndcg10'])}"
                     for m in ("only_public", "naive", "clustering", "joint", "joint_only_public")]
            gain = row["only_public"]["rmse"] - row["naive"]["rmse"]
            lines.append(f"| {key} | {row['private_fraction']:.2f} | " + " | ".join(cells) + f" | {gain:+.4f} | "
                         f"{_fmt(full.get('epsilon_lb'))} | {_fmt(leaky.get('epsilon_lb'))} "
                         f"({_fmt(leaky.get('ceiling'))}) |")
        lines += ["", "Cells are RMSE / NDCG@10 on held-out ratings; naive gain = RMSE(only public) − RMSE(naive)."]
        ablation = {k: v["naive_by_fine_tune_epochs"] for k, v in world["allocations"].items()
                    if "naive_by_fine_tune_epochs" in v}
        if ablation:
            epochs = list(next(iter(ablation.values())))
            lines += ["", "Naive RMSE by the device's fine-tuning epochs (0 = only public):", "",
                      "| allocation | " + " | ".join(epochs) + " |", "|---" * (len(epochs) + 1) + "|"]
            lines += [f"| {k} | " + " | ".join(_fmt(v[e]) for e in epochs) + " |" for k, v in ablation.items()]
        lines.append("")
    lines += over_splits(result)
    lines += ["Paper (MovieLens-100K, H1, RMSE: only public / naive / clustering / joint): " + "; ".join(
        f"Beta{b}: " + " / ".join(f"{x:.4f}" for x in v) for b, v in PAPER_H1.items()) + ".", ""]
    return "\n".join(lines)


def over_splits(result: dict) -> list[str]:
    """Mean ± sd of every method's RMSE over the ratings file's splits, beside the paper's Table 2 (H1 (2,2))."""
    splits = [w for name, w in result["worlds"].items() if name.startswith("ratings_file split")]
    if len(splits) < 2:
        return []

    def cell(values: list[float]) -> str:
        values = np.array([v for v in values if v is not None], float)
        return f"{values.mean():.4f} ± {values.std(ddof=1):.4f}" if values.size > 1 else _fmt(values.mean())

    lines = [f"## The ratings file over {len(splits)} per-user splits (RMSE mean ± sd)", "",
             f"All public: {cell([w['baselines']['all_public']['rmse'] for w in splits])} (paper 0.8923); all "
             f"private: {cell([w['baselines']['all_private']['rmse'] for w in splits])} (paper 0.9632); "
             f"scikit-surprise SVD on the same splits: {cell([w.get('surprise_svd_rmse') for w in splits])}.", "",
             "| allocation | only public | naive | clustering | joint | paper (only public / naive / clustering / "
             "joint) |", "|---|---|---|---|---|---|"]
    for key in splits[0]["allocations"]:
        rows = [w["allocations"][key] for w in splits if key in w["allocations"]]
        paper = PAPER_H1.get(tuple(float(x) for x in key.split(" ", 1)[1].strip("()").split(", "))) \
            if key.startswith("H1") else None
        lines.append(f"| {key} ({len(rows)} splits) | " + " | ".join(
            cell([r[m]["rmse"] for r in rows]) for m in ("only_public", "naive", "clustering", "joint"))
            + f" | {' / '.join(f'{x:.4f}' for x in paper) if paper else '–'} |")
    return lines + [""]
