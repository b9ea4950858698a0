"""The papers' figures beside ours, drawn from the benchmark results: ``docs/figures/*.png``.

``python -m benchmarks.plots`` reads ``benchmarks/results`` (``RESHAPE_RESULTS_DIR``
if set) and draws, for ``docs/reproduction.md``:

* ``fig3a.png``: Sudarsan & Ribbens 2007 Fig. 3(a), LU iteration time and redistribution cost
  per size, the paper's and ours, each relative to its first point (the
  absolute scales differ by two orders of magnitude);
* ``fig3b.png``: Sudarsan & Ribbens 2007 Fig. 3(b), checkpoint ÷ ReSHAPE redistribution time per
  application, the paper's and ours;
* ``fig2.png``: Sudarsan & Ribbens 2007 Fig. 2(a)/(b), LU iteration time and redistribution
  cost per size for several matrix sizes: measured on 2 cores, the model on
  dedicated cores, and the paper's 12000 curve (Fig. 3(a)), times relative to
  the time at 2;
* ``tables45.png``: Sudarsan & Ribbens 2007 Tables 4 and 5, dynamic ÷ static turnaround per job;
* ``dep_sweep.png``: Islam, Prodromidis & Squillante Figs. 11-16 in shape, T_SP* / T_DP and p_r over load;
* ``spanning.png``: Lynch 1999 §5.4, mean response time over the spanning factor.

A figure whose results file is missing is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchmarks._common import RESULTS

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "figures")
FIG3A = {"procs": [2, 4, 6, 9, 12, 16], "T": [129.63, 112.52, 82.31, 79.61, 69.85, 74.91],
         "redist": [8.00, 7.74, 5.25, 4.86, 4.41]}  # redistribution into 4, 6, 9, 12, 16
FIG3B = {"lu": 8.3, "mm": 4.5, "jacobi": 14.5, "fft2d": 7.9}
TABLES45 = {"W1": {"LU": 0.809, "MM": 0.604, "Master-worker": 1.004, "Jacobi": 0.680, "FFT": 0.759},
            "W2": {"LU": 0.945, "Jacobi": 0.933, "Master-worker": 0.995, "FFT": 1.0}}


def _load(name: str) -> dict | None:
    try:
        with open(os.path.join(RESULTS, f"{name}.json")) as f:
            return json.load(f)
    except OSError:
        print(f"skipped: no {name}.json in {RESULTS}")
        return None


def _save(fig, name: str) -> None:
    os.makedirs(OUT, exist_ok=True)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, name), dpi=90)
    plt.close(fig)
    print(f"wrote docs/figures/{name}")


def fig3a(d: dict) -> None:
    rows = d["fig3a"]["rows"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    a.plot(FIG3A["procs"], [t / FIG3A["T"][0] for t in FIG3A["T"]], "o-", label="paper (12000, System X)")
    a.plot([r["procs"] for r in rows], [r["T"] / rows[0]["T"] for r in rows], "s--", label="ours (2 cores)")
    a.set(xlabel="processors", ylabel="iteration time / time at 2", title="Fig. 3(a): iteration time")
    b.plot(FIG3A["procs"][1:], [c / FIG3A["redist"][0] for c in FIG3A["redist"]], "o-", label="paper")
    ours = rows[1:]
    b.plot([r["procs"] for r in ours], [r["redist"] / ours[0]["redist"] for r in ours], "s--", label="ours")
    b.set(xlabel="processors (after the expansion)", ylabel="cost / cost into 4", title="redistribution cost")
    for ax in (a, b):
        ax.legend(fontsize=8)
    _save(fig, "fig3a.png")


def fig2(d: dict) -> None:
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    paper = d["paper"]["12000"]
    a.plot(paper["procs"], [t / paper["T"][0] for t in paper["T"]], "k^-", label="paper 12000 (System X)")
    for k, c in enumerate(d["curves"]):
        pts, col = c["points"], f"C{k}"
        procs = [p["procs"] for p in pts]
        a.plot(procs, [p["T"] / pts[0]["T"] for p in pts], "s--", color=col, ms=4, label=f"{c['n']} measured")
        model = {int(p): t for p, t in c["model"].items()}
        a.plot(list(model), [t / model[2] for t in model.values()], "o-", color=col, ms=3,
               label=f"{c['n']} model (sweet spot {c['model_sweet_spot']})")
        b.plot(procs[1:], [1e3 * p["redist_into"] for p in pts[1:]], "s-", color=col, label=str(c["n"]))
    a.set(xlabel="processors", ylabel="iteration time / time at 2", title="Fig. 2(a): LU iteration time",
          yscale="log")
    b.set(xlabel="processors (after the expansion)", ylabel="redistribution (ms)",
          title="Fig. 2(b): redistribution into each size")
    bp = b.twinx()
    bp.plot(paper["procs"][1:], paper["redist"], "k^-", label="paper 12000 (s, right)")
    bp.set_ylabel("paper (s)")
    a.legend(fontsize=5.5, ncol=2, loc="lower left")
    b.legend(fontsize=7, loc="center right")
    bp.legend(fontsize=7, loc="upper right")
    _save(fig, "fig2.png")


def _bars(ax, labels: list[str], series: dict[str, list[float]], ylabel: str, title: str) -> None:
    w = 0.8 / len(series)
    for i, (name, vals) in enumerate(series.items()):
        ax.bar([x + i * w for x in range(len(labels))], vals, w, label=name)
    ax.set_xticks([x + w * (len(series) - 1) / 2 for x in range(len(labels))], labels)
    ax.set(ylabel=ylabel, title=title)
    ax.legend(fontsize=8)


def fig3b(d: dict) -> None:
    ratios = d["summary"]["checkpoint_over_reshape"]
    apps = list(FIG3B)
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    _bars(ax, apps, {"paper": [FIG3B[a] for a in apps], "ours": [ratios[a] for a in apps]},
          "checkpoint / ReSHAPE", "Fig. 3(b): redistribution time ratio")
    _save(fig, "fig3b.png")


def tables45(d: dict) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, (w, pub) in zip(axes, TABLES45.items(), strict=True):
        jobs = d["workloads"][w]["jobs"]
        names = [j["job"] for j in jobs]
        _bars(ax, names, {"paper": [pub[n] for n in names], "ours (reshape-paper)": [j["ratio_paper"] for j in jobs],
                          "ours (reshape-plus)": [j["ratio_plus"] for j in jobs]},
              "dynamic / static turnaround", f"Table {4 if w == 'W1' else 5} ({w})")
        ax.axhline(1.0, color="grey", lw=0.8)
    _save(fig, "tables45.png")


def dep_sweep(d: dict) -> None:
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.5))
    curves: dict[tuple[str, str], list[dict]] = {}
    for r in d["rows"]:
        curves.setdefault((r["class"], r["arrivals"]), []).append(r)
    for (cls, arr), rs in curves.items():
        style = "-" if arr == "Poisson" else "--"
        a.plot([r["U"] for r in rs], [r["ratio"] for r in rs], style, marker="o", ms=3, label=f"{cls}, {arr}")
        b.plot([r["U"] for r in rs], [r["p_r"] for r in rs], style, marker="o", ms=3, label=f"{cls}, {arr}")
    a.axhline(1.0, color="grey", lw=0.8)
    a.set(xlabel="relative load U", ylabel="T_SP* / T_DP", title="Islam, Prodromidis & Squillante Figs. 11-13 (shape)")
    b.set(xlabel="relative load U", ylabel="p_r", title="Islam, Prodromidis & Squillante Figs. 14-16 (shape)")
    a.legend(fontsize=7)
    _save(fig, "dep_sweep.png")


def spanning(d: dict) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    series: dict[tuple[str, str], list[dict]] = {}
    for r in d["rows"]:
        series.setdefault((r["variant"], r["policy"]), []).append(r)
    for (variant, pol), rs in series.items():
        ax.plot([r["sigma"] for r in rs], [r["mrt"] / 1e3 for r in rs], "-" if pol == "ss" else "--", marker="o",
                label=f"{pol.upper()}, {variant}")
    ax.set(xlabel="spanning factor sigma", ylabel="mean response time (ks)",
           title="Lynch 1999 §5.4, Network 13, load 0.3")
    ax.legend(fontsize=7)
    _save(fig, "spanning.png")


def main(argv: list[str] | None = None) -> int:
    for name, draw in (("resize_apps", fig3a), ("resize_apps", fig3b), ("resize_apps_fig2", fig2),
                       ("workload", tables45),
                       ("dep_sweep", dep_sweep), ("spanning", spanning)):
        d = _load(name)
        if d is not None:
            draw(d)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
