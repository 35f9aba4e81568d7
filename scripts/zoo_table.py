#!/usr/bin/python3
"""The zoo benchmark's report: reads the zoo.json of scripts/bench_zoo.sh and writes the
measurement log docs/benchmarks/zoo.md (the run's CPU, date and command; one row per model with
its resolution, its accuracy against ONNX Runtime and the kfuse f32 / ORT time ratio of every
cell against the 1.0x target; the geometric mean per thread count against the 0.75x target) and
docs/plots/zoo.png (python3-matplotlib: the ratio per model and cell as horizontal bars, a line
at 1.0).

  /usr/bin/python3 scripts/zoo_table.py [--int8] [ZOO_JSON] [--stdout] [--md FILE] [--plot FILE] [--note TEXT]

ZOO_JSON defaults to build/bench/zoo-results/zoo.json; --stdout prints the tables only (no
files written), as scripts/bench_zoo.sh does after a run. --int8 reads the zoo_int8.json of
scripts/bench_zoo_int8.sh instead (kfuse int8 against ONNX Runtime int8 on kfuse's QDQ export)
and writes docs/benchmarks/zoo_int8.md and docs/plots/zoo_int8.png."""
import argparse
import json
import math
import os
import subprocess
import sys

CELL_TARGET, GEOMEAN_TARGET, ACC_TARGET = 1.0, 0.75, 1e-4
INT8_GEOMEAN_TARGET = 0.8
CELLS = [("b1_t1", 1, 1), ("b1_t2", 1, 2), ("b8_t1", 8, 1), ("b8_t2", 8, 2)]


def zoo_names():
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, os.path.join(here, "make_zoo_models.py"), "--list"],
                       capture_output=True, text=True)
    return r.stdout.split() if r.returncode == 0 else []


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def geomean_table(models, cells, what, target):
    """Per thread count, over every cell that has both figures: the cells, those at most 1.0x,
    and the geometric mean of the ratios against `target`."""
    L = [f"| threads | cells | cells <= 1.0x | geometric mean of {what} (target <= {target:g}) |", "|---|---|---|---|"]
    for t in sorted({t for _, _, t in cells}):
        rs = [c["ratio"] for e in models.values() for k, _, tt in cells if tt == t
              for c in [(e.get("cells") or {}).get(k)] if c and c.get("ratio")]
        g = geomean(rs)
        gs = f"{g:.2f} ({verdict(g <= target)})" if g else "-"
        L.append(f"| {t} | {len(rs)} | {sum(r <= CELL_TARGET for r in rs)} | {gs} |")
    return L


def verdict(ok):
    return "met" if ok else "not met"


def acc_cell(e):
    a = e.get("accuracy") or {}
    if "error" in a:
        return "fails: " + a["error"].replace("|", "/")
    if a.get("ort_range") == 0:
        return "not checked: ORT's output is constant"
    if a.get("rel_range") is None:
        return "-"
    top1 = "" if a.get("top1_agree", True) else ", top-1 differs"
    return f"{a['rel_range']:.1e} ({verdict(a['met'])}{top1})"


def ratio_cell(c):
    if c is None:
        return "-"
    if c.get("ratio") is None:
        return "fails" if c.get("kfuse_ms") is None else "ORT fails"
    split = " split" if c.get("split") else ""
    return f"{c['ratio']:.2f} ({verdict(c['ratio'] <= CELL_TARGET)}{split})"


def ms_cell(c):
    if c is None:
        return "-"
    k = f"{c['kfuse_ms']:.2f}" if c.get("kfuse_ms") is not None else "fails"
    o = f"{c['ort_ms']:.2f}" if c.get("ort_ms") is not None else "fails"
    return f"{k} / {o}"


def acc_line(models):
    acc = [e["accuracy"] for e in models.values() if (e.get("accuracy") or {}).get("rel_range") is not None]
    return (f"Accuracy: {sum(a['met'] for a in acc)} of {len(models)} models within {ACC_TARGET:g} "
            "of ONNX Runtime's output range.")


def not_run(models):
    missing = [n for n in zoo_names() if n not in models]
    return ["not measured in this run: " + ", ".join(missing)] if missing else []


def report(doc):
    """The markdown of one run: header lines, the ratio table, geometric means, ms table, notes."""
    models = doc["models"]
    cells = [c for c in CELLS if any(c[0] in (e.get("cells") or {}) for e in models.values())]
    L = []
    L.append(f"{doc['cpu']}")
    L.append(f"Date: {doc['date']}; `{doc['command'].strip()}`; kfuse: {doc.get('kfuse_commit', '?')}; "
             f"ONNX Runtime {doc.get('onnxruntime_node', '?')} (npm onnxruntime-node); medians of "
             f"{doc['rounds']} alternated rounds" + (" (--quick: batch 1, 1 thread)" if doc.get("quick") else "")
             + (" (--accuracy: no timing)" if doc.get("timing") is False else ""))
    load = doc.get("load_average") or [None, None]
    if load[0]:
        L.append(f"Load average (1, 5, 15 min) as the run started: {load[0]}; as it ended: {load[1] or '?'}")
    if doc.get("note"):
        L.append(doc["note"])
    if doc.get("ort_overhead_us") is not None:
        L.append(f"ONNX Runtime per-call overhead from node (x + 1 on one float): {doc['ort_overhead_us']} us, "
                 "inside every ORT figure")
    L = [x for line in L for x in (line, "")]  # one paragraph each
    head = ["model", "family", "resolution", "G MACs / image",
            f"f32 accuracy: max abs diff / ORT range (<= {ACC_TARGET:g})"]
    head += [f"b{b} t{t}: kfuse / ORT (<= {CELL_TARGET:.1f})" for _, b, t in cells]
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    notes = []
    for name, e in models.items():
        if e.get("skipped"):
            L.append(f"| {name} | {e.get('family') or '-'} | - | - | skipped: {e['skipped'][:120]} |"
                     + " - |" * len(cells))
            continue
        res = f"{e['resolution']}" + ("" if e["resolution"] == e["native_resolution"]
                                      else f" (reduced from {e['native_resolution']})")
        if e.get("note"):
            notes.append(f"{name}: {e['note']}")
        row = [name, e.get("family") or "-", res, f"{e['gmacs']:.2f}", acc_cell(e)]
        row += [ratio_cell((e.get("cells") or {}).get(k)) for k, _, _ in cells]
        L.append("| " + " | ".join(row) + " |")
    if not cells:  # an --accuracy run
        return "\n".join(L + ["", acc_line(models), ""] + [f"- {n}" for n in notes + not_run(models)]) + "\n"
    L.append("")
    L += geomean_table(models, cells, "kfuse / ORT", GEOMEAN_TARGET)
    L.append("")
    L.append(acc_line(models))
    L.append("")
    L.append("Milliseconds (median), kfuse / ONNX Runtime:")
    L.append("")
    L.append("| model | " + " | ".join(f"b{b} t{t}" for _, b, t in cells) + " |")
    L.append("|---|" + "---|" * len(cells))
    for name, e in models.items():
        if not e.get("skipped"):
            L.append(f"| {name} | " + " | ".join(ms_cell((e.get("cells") or {}).get(k)) for k, _, _ in cells) + " |")
    for name, e in models.items():
        for k, _, _ in cells:
            c = (e.get("cells") or {}).get(k) or {}
            for who in ("kfuse", "ort"):
                if c.get(f"{who}_error"):
                    notes.append(f"{name} {k} {who}: {c[who + '_error']}")
    notes += not_run(models)
    if notes:
        L.append("")
        L += [f"- {n}" for n in notes]
    return "\n".join(L) + "\n"


def report_int8(doc):
    """The markdown of one int8 run: header lines, accuracy and ratio table, geometric means."""
    models = doc["models"]
    cells = [c for c in CELLS if any(c[0] in (e.get("cells") or {}) for e in models.values())]
    L = [doc["cpu"], "",
         f"Date: {doc['date']}; `{doc['command'].strip()}`; kfuse: {doc.get('kfuse_commit', '?')}; "
         f"ONNX Runtime {doc.get('onnxruntime_node', '?')} (npm onnxruntime-node); medians of "
         f"{doc['rounds']} alternated rounds", ""]
    if doc.get("note"):
        L += [doc["note"], ""]
    if doc.get("ort_overhead_us") is not None:
        L += [f"ONNX Runtime per-call overhead from node (x + 1 on one float): {doc['ort_overhead_us']} us, "
              "inside every ORT figure", ""]
    head = ["model", "QDQ export", "top-1 vs f32: kfuse int8 / ORT int8", "kfuse = ORT int8 top-1",
            "max error / f32 range: kfuse / ORT", "f32 top-2 margin / range",
            "kfuse bf16: top-1 vs f32, max error / range"]
    head += [f"b{b} t{t}: kfuse int8 / ORT int8" for _, b, t in cells]
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    for name, e in models.items():
        if e.get("error") and not e.get("export"):
            L.append(f"| {name} | fails: {e['error'][:120].replace('|', '/')} |" + " - |" * (len(head) - 2))
            continue
        a = e.get("accuracy")
        if a:
            n = a["samples"]
            acc = [f"{a['kfuse_top1_vs_f32']}/{n} / {a['ort_top1_vs_f32']}/{n}", f"{a['kfuse_top1_vs_ort_int8']}/{n}",
                   f"{a['kfuse_err_rel_range']:.3f} / {a['ort_err_rel_range']:.3f}", f"{a['f32_margin_rel_range']:.4f}",
                   f"{a['bf16_top1_vs_f32']}/{n}, {a['bf16_err_rel_range']:.4f}" if "bf16_top1_vs_f32" in a else "-"]
        else:
            acc = [e.get("error", "-")[:80].replace("|", "/"), "-", "-", "-", "-"]
        row = [name, e["export"].split(": ", 1)[-1].rstrip(":")] + acc
        for k, _, _ in cells:
            c = (e.get("cells") or {}).get(k)
            row.append("-" if not c else (f"{c['ratio']:.2f} ({c['kfuse_ms']:.2f} / {c['ort_ms']:.2f} ms)"
                                          if c.get("ratio") else ("fails" if c.get("kfuse_ms") is None else "ORT fails")))
        L.append("| " + " | ".join(row) + " |")
    L += [""] + geomean_table(models, cells, "kfuse int8 / ORT int8", INT8_GEOMEAN_TARGET)
    return "\n".join(L) + "\n"


def plot(doc, path, xlabel="kfuse f32 time / ONNX Runtime time (lower is better; line: 1.0, dashed: 0.75)",
         title="torchvision zoo, kfuse-run vs ONNX Runtime", dashed=GEOMEAN_TARGET):
    import matplotlib  # noqa: F401 (ImportError: main() says how to install it)
    from bench_report import ratio_plot
    models = [(n, e) for n, e in doc["models"].items() if e.get("cells")]
    cells = [c for c in CELLS if any(c[0] in e["cells"] for _, e in models)]
    labels = [f"{n} ({e['resolution']})" if e.get("resolution") else n for n, e in models]
    series = {f"batch {b}, {t} thread{'s' if t > 1 else ''}":
              [(e["cells"].get(k) or {}).get("ratio") for _, e in models] for k, b, t in cells}
    ratio_plot(path, f"{title} ({doc['date']})", labels, series, {"geometric-mean target": dashed},
               xlabel, footer=doc["cpu"])


PREAMBLE = """# The torchvision zoo against ONNX Runtime: measurement log

`scripts/bench_zoo.sh` exports one architecture per family of torchvision 0.14 (Debian's
python3-torchvision; `scripts/make_zoo_models.py`: random weights, `torch.manual_seed(0)`, ONNX
opset 17, dynamic batch) and runs each through `kfuse-run` (f32, its defaults: `--layout auto`,
`--split auto`) and ONNX Runtime (npm `onnxruntime-node` via `bench/ort/ort_run.js`,
`intraOpNumThreads` = kfuse's threads) in alternated rounds, batch 1 and 8, 1 and 2 threads.
Accuracy: kfuse's batch-1 output against ONNX Runtime's, max |difference| over the range of
ONNX Runtime's output. Models above 6 G multiply-adds per image at torchvision's resolution go in
at a smaller one (the resolution column; notes below the tables say why). Targets (f32): every
cell at most 1.0x ONNX Runtime's time; the geometric mean at most 0.75x on 1 thread and on 2;
every model within 1e-4 of ONNX Runtime's output range. This page is written by
`scripts/zoo_table.py` from the run's `zoo.json`; only ratios within one run compare (2-vCPU VMs
move 20-30% between runs).

![kfuse / ONNX Runtime time per model](../plots/zoo.png)

"""


PREAMBLE_INT8 = """# The torchvision zoo in int8 against ONNX Runtime's int8: measurement log

`scripts/bench_zoo_int8.sh` calibrates each CNN of the zoo (`scripts/make_zoo_models.py`) with
kfuse on 16 random samples and writes it in QDQ form (`kfuse-run --prec int8 --calib DIR
--export-qdq OUT.onnx`: kfuse's activation parameters and its own int8 weights, per output
channel), so that ONNX Runtime runs the same quantization with its own int8 kernels
(QLinearConv, QLinearMatMul, ...). Accuracy is taken on 8 other random samples against ONNX
Runtime's f32 output of the original model. Timing: `kfuse-run --prec int8` on the original
model against ONNX Runtime on the QDQ file, alternated rounds, batch 1 and 8, 1 and 2 threads.
Target: the geometric mean of kfuse int8 / ORT int8 at most 0.8 on 1 thread and on 2. This page
is written by `scripts/zoo_table.py --int8` from the run's `zoo_int8.json`.

![kfuse int8 / ONNX Runtime int8 time per model](../plots/zoo_int8.png)

"""


def main():
    ap = argparse.ArgumentParser(description="zoo.json -> docs/benchmarks/zoo.md, docs/plots/zoo.png")
    ap.add_argument("--int8", action="store_true", help="the int8 run's zoo_int8.json")
    ap.add_argument("json", nargs="?")
    ap.add_argument("--stdout", action="store_true", help="print the tables, write no file")
    ap.add_argument("--md")
    ap.add_argument("--plot")
    ap.add_argument("--note", help="a line for the run's header (e.g. what else ran on the machine)")
    a = ap.parse_args()
    kind = "zoo_int8" if a.int8 else "zoo"
    a.json = a.json or f"build/bench/{kind.replace('_', '-')}-results/{kind}.json"
    a.md = a.md or f"docs/benchmarks/{kind}.md"
    a.plot = a.plot or f"docs/plots/{kind}.png"
    if not os.path.exists(a.json):
        print(f"zoo_table: no {a.json}: run scripts/bench_zoo.sh first", file=sys.stderr)
        return 2
    doc = json.load(open(a.json))
    if a.note:
        doc["note"] = a.note
    text = report_int8(doc) if a.int8 else report(doc)
    if a.stdout:
        sys.stdout.write(text)
        return 0
    try:
        if a.int8:
            plot(doc, a.plot, "kfuse int8 time / ONNX Runtime int8 time (lower is better; line: 1.0, dashed: 0.8)",
                 "torchvision zoo in int8, kfuse-run vs ONNX Runtime on the same QDQ model", INT8_GEOMEAN_TARGET)
        else:
            plot(doc, a.plot)
    except ImportError:
        print("zoo_table: no matplotlib: apt-get install python3-matplotlib (scripts/setup.sh --peers)",
              file=sys.stderr)
        return 2
    os.makedirs(os.path.dirname(a.md) or ".", exist_ok=True)
    with open(a.md, "w") as f:
        f.write((PREAMBLE_INT8 if a.int8 else PREAMBLE) + f"## Run of {doc['date']}\n\n" + text)
    print(f"wrote {a.md} and {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
