"""docs/plots/llm.png from the LLM benchmark's JSON (scripts/bench_llm.sh writes llm.json): tokens
per second of kfuse-generate and llama.cpp per model, decode (tg128) and prefill (pp512), on 1 and
2 threads; decode also shows the bandwidth bound (probed read bandwidth / bytes per token).
  plot_llm.py OUT.png llm.json"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

data = json.load(open(sys.argv[2]))
rows = data["rows"]
models = list(dict.fromkeys(r["model"] for r in rows))
tests = [("tg128", "decode (tg128)"), ("pp512", "prefill (pp512)")]
fig, axes = plt.subplots(len(tests), 2, figsize=(12, 7), squeeze=False)
for i, (test, title) in enumerate(tests):
    for j, threads in enumerate((1, 2)):
        ax = axes[i][j]
        pick = {r["model"]: r for r in rows if r["test"] == test and r["threads"] == threads}
        xs = [m for m in models if m in pick]
        pos = range(len(xs))
        ax.bar([p - 0.2 for p in pos], [pick[m]["llama.cpp"] for m in xs], 0.4, label="llama.cpp")
        ax.bar([p + 0.2 for p in pos], [pick[m]["kfuse"] for m in xs], 0.4, label="kfuse")
        if test == "tg128":
            ax.scatter(list(pos), [pick[m]["bound"] for m in xs], marker="_", s=400, color="k",
                       label="bandwidth bound", zorder=3)
        ax.set_xticks(list(pos))
        ax.set_xticklabels(xs, rotation=20, fontsize=8)
        ax.set_ylabel("tokens / s")
        ax.set_title(f"{title}, {threads} thread{'s' if threads > 1 else ''}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
fig.suptitle(f"{data['cpu']}, code of {data['commit']}", fontsize=9)
fig.tight_layout()
fig.savefig(sys.argv[1], dpi=110)
print(f"wrote {sys.argv[1]}")
