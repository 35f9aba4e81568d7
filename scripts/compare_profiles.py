#!/usr/bin/env python3
"""kfuse-run's profile beside ONNX Runtime's, node by node: where a model loses or wins.

  kfuse-run MODEL.onnx --threads 1 --profile > kfuse.txt
  node bench/ort/ort_run.js MODEL.onnx --threads 1 --profile ort.json
  scripts/compare_profiles.py kfuse.txt ort.json [--top N]

Both sides are grouped by the module path of their nodes' names (torch.onnx names a node's
output /block/f/b/b.0/Conv_output_0; the path is the name without its last two parts), since
the two runtimes fuse differently and name their fused kernels after different outputs (a conv
with its ReLU: kfuse after the conv's output, ONNX Runtime after the ReLU's). Prints each
group's microseconds per run in both, largest loss first, then the groups one side alone has
(layout conversions, reorders) and the totals. ONNX Runtime's times are its kernels' own
(its profiler's per-node kernel_time, averaged over the profiled runs); kfuse-run's the
us/call column. Profiling costs both some time, and only ratios of one window compare.
"""
import argparse
import collections
import json
import re
import sys

ROW = re.compile(r'^(\S+)\s+(.*?)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%')


def group_of(name):
    for suffix in ('_nchwc', '_output_0'):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    parts = name.split('/')
    return '/'.join(parts[:-2]) if len(parts) > 3 else name


def read_kfuse(path):
    times, ops = collections.defaultdict(float), collections.defaultdict(list)
    inside = False
    with open(path) as f:
        for line in f:
            if line.startswith('node ') and 'us/call' in line:
                inside = True
                continue
            if inside and line.startswith('total'):
                break
            m = ROW.match(line) if inside else None
            if m:
                g = group_of(m.group(1))
                times[g] += float(m.group(4))
                ops[g].append(m.group(2))
    if not times:
        sys.exit(f'compare_profiles: no profile table in {path} (kfuse-run ... --profile)')
    return times, ops


def read_ort(path):
    with open(path) as f:
        events = json.load(f)
    runs = sum(1 for e in events if e.get('cat') == 'Session' and e.get('name') == 'model_run')
    if runs == 0:
        sys.exit(f'compare_profiles: no model_run in {path} (bench/ort/ort_run.js --profile)')
    times, ops = collections.defaultdict(float), collections.defaultdict(set)
    for e in events:
        if e.get('cat') == 'Node' and e.get('name', '').endswith('_kernel_time'):
            g = group_of(e['name'][: -len('_kernel_time')])
            times[g] += e['dur'] / runs
            ops[g].add(e.get('args', {}).get('op_name', '?'))
    return times, ops, runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('kfuse', help="kfuse-run --profile's output")
    ap.add_argument('ort', help="bench/ort/ort_run.js --profile's trace")
    ap.add_argument('--top', type=int, default=25, help='groups shown at each end')
    a = ap.parse_args()
    kt, kops = read_kfuse(a.kfuse)
    ot, oops, runs = read_ort(a.ort)
    both = sorted((kt[g] - ot[g], g) for g in kt if g in ot)
    print(f'kfuse: {sum(kt.values()):.0f} us per run in {len(kt)} groups; ONNX Runtime: '
          f'{sum(ot.values()):.0f} us of kernels per run ({runs} runs) in {len(ot)} groups')
    print(f'{"group":56s} {"kfuse us":>9s} {"ORT us":>9s} {"ratio":>6s}  kfuse kernel')
    shown = both[::-1] if len(both) <= 2 * a.top else both[::-1][: a.top] + [None] + both[::-1][-a.top:]
    for row in shown:
        if row is None:
            print('...')
            continue
        _, g = row
        print(f'{g[-56:]:56s} {kt[g]:9.1f} {ot[g]:9.1f} {kt[g] / max(ot[g], 1e-9):6.2f}  '
              f'{"; ".join(kops[g])[:60]}')
    print(f'in both: kfuse {sum(kt[g] for _, g in both):.0f} us, ONNX Runtime '
          f'{sum(ot[g] for _, g in both):.0f} us')
    for who, t, other, ops in (('kfuse only', kt, ot, kops), ('ONNX Runtime only', ot, kt, oops)):
        alone = sorted(((t[g], g) for g in t if g not in other), reverse=True)
        if alone:
            print(f'{who}: {sum(x for x, _ in alone):.0f} us: ' +
                  ', '.join(f'{g} {x:.1f} ({"; ".join(sorted(ops[g]))[:40]})' for x, g in alone[:8]))


if __name__ == '__main__':
    main()
