// Part of the repository so that a clean clone can run
// scripts/bench_threading.sh (which also reads the mean it adds to the latency line); install
// onnxruntime-node with scripts/setup.sh --peers.
// ONNX Runtime (npm onnxruntime-node, CPU EP) as a same-run peer: golden outputs and timing.
//
//   node ort_run.js MODEL.onnx [--input NAME=FILE.npy]... [--shape NAME=d0,d1,...]...
//        [--threads N] [--reps N] [--warmup N] [--output-dir DIR] [--opt all|basic|disabled]
//        [--profile FILE.json]
//
// Inputs: .npy files (float32, float64 -> float32, int64, int32, uint8, int8, bool) or, with
// --shape, deterministic float32 values sin(0.37 i) (the same sequence every run). Dynamic
// dimensions must be fixed by --shape or by the .npy file's shape.
// Prints one line: `latency: median X ms, min Y ms, max Z ms (N runs, T threads)`, measured per
// call after the warm-up; --output-dir writes every output as DIR/<output name>.npy.
// --profile: after the timed runs, a second session with ONNX Runtime's profiler on runs the
// model --reps times more and writes its per-node trace to FILE.json (the timed runs above are
// not profiled); scripts/compare_profiles.py sets it beside kfuse-run --profile's table.
// Needs: NODE_PATH pointing at a folder whose node_modules holds onnxruntime-node (e.g.
// `mkdir -p /tmp/ortn && cd /tmp/ortn && npm pack onnxruntime-node@1.30.0 &&
//  npm install --ignore-scripts ./onnxruntime-node-1.30.0.tgz`, then NODE_PATH=/tmp/ortn/node_modules).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const NPY_TYPES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array], '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array],
  '|b1': ['bool', Uint8Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hoff = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', hoff, hoff + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order is not supported`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(Boolean).map(Number);
  const t = NPY_TYPES[descr];
  if (!t) throw new Error(`${file}: dtype ${descr} is not supported`);
  const start = hoff + hlen;
  const bytes = buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length);
  let data = new t[1](bytes);
  let type = t[0];
  if (type === 'float64') { data = Float32Array.from(data); type = 'float32'; }
  if (descr === '|b1') data = Uint8Array.from(data, v => v !== 0);
  return new ort.Tensor(type, data, shape);
}

function writeNpy(file, tensor) {
  const descr = Object.keys(NPY_TYPES).find(k => NPY_TYPES[k][0] === tensor.type) || '<f4';
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(63 - ((header.length + 10) % 64)) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1'); pre[6] = 1; pre[7] = 0; pre.writeUInt16LE(header.length, 8);
  const d = tensor.data;
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'),
    Buffer.from(d.buffer, d.byteOffset, d.byteLength)]));
}

function usage(msg) {
  if (msg) console.error(`ort_run: ${msg}`);
  console.error('usage: node ort_run.js MODEL.onnx [--input NAME=FILE.npy]... [--shape NAME=d0,d1,...]... ' +
    '[--threads N] [--reps N] [--warmup N] [--output-dir DIR] [--opt all|basic|disabled] ' +
    '[--profile FILE.json]');
  process.exit(2);
}

(async () => {
  const args = process.argv.slice(2);
  if (!args.length || args[0].startsWith('-')) usage('no model');
  const model = args[0];
  const o = {inputs: {}, shapes: {}, threads: 1, reps: 100, warmup: 10, outdir: null, opt: 'all',
    profile: null};
  for (let i = 1; i < args.length; i++) {
    const a = args[i], v = args[i + 1];
    if (v === undefined) usage(`${a} needs a value`);
    const kv = () => { const j = v.indexOf('='); if (j < 1) usage(`${a} ${v}: want NAME=VALUE`); return [v.slice(0, j), v.slice(j + 1)]; };
    if (a === '--input') { const [n, f] = kv(); o.inputs[n] = f; }
    else if (a === '--shape') { const [n, s] = kv(); o.shapes[n] = s.split(',').map(Number); }
    else if (a === '--threads') o.threads = +v;
    else if (a === '--reps') o.reps = +v;
    else if (a === '--warmup') o.warmup = +v;
    else if (a === '--output-dir') o.outdir = v;
    else if (a === '--opt') o.opt = v;
    else if (a === '--profile') o.profile = v;
    else usage(`unknown option ${a}`);
    i++;
  }
  const options = {intraOpNumThreads: o.threads, interOpNumThreads: 1, graphOptimizationLevel: o.opt,
    executionMode: 'sequential'};
  const s = await ort.InferenceSession.create(model, options);
  const feeds = {};
  for (const name of s.inputNames) {
    if (o.inputs[name]) feeds[name] = readNpy(o.inputs[name]);
    else if (o.shapes[name]) {
      const shape = o.shapes[name], n = shape.reduce((a, b) => a * b, 1), d = new Float32Array(n);
      for (let i = 0; i < n; i++) d[i] = Math.sin(i * 0.37);
      feeds[name] = new ort.Tensor('float32', d, shape);
    } else usage(`input '${name}' needs --input ${name}=FILE.npy or --shape ${name}=...`);
  }
  let out;
  for (let i = 0; i < Math.max(1, o.warmup); i++) out = await s.run(feeds);
  const t = [];
  for (let i = 0; i < o.reps; i++) {
    const a = process.hrtime.bigint(); await s.run(feeds); t.push(Number(process.hrtime.bigint() - a) / 1e6);
  }
  t.sort((a, b) => a - b);
  const med = t[Math.floor(t.length / 2)];
  const mean = t.reduce((a, b) => a + b, 0) / t.length;
  console.log(`latency: median ${med.toFixed(4)} ms, min ${t[0].toFixed(4)} ms, max ${t[t.length - 1].toFixed(4)} ms ` +
    `(${t.length} runs, ${o.threads} threads); mean ${mean.toFixed(4)} ms`);
  if (o.outdir) {
    fs.mkdirSync(o.outdir, {recursive: true});
    for (const name of s.outputNames) writeNpy(path.join(o.outdir, name.replace(/[^A-Za-z0-9_.-]/g, '_') + '.npy'), out[name]);
  }
  if (o.profile) {
    // ONNX Runtime names the trace <prefix>_<date and time>.json: a prefix of our own, then
    // renamed to the file asked for.
    const dir = path.dirname(path.resolve(o.profile)), prefix = `ort_run_profile_${process.pid}`;
    const p = await ort.InferenceSession.create(model, {...options, enableProfiling: true,
      profileFilePrefix: path.join(dir, prefix)});
    for (let i = 0; i < Math.max(1, o.warmup) + o.reps; i++) await p.run(feeds);
    p.endProfiling();
    const made = fs.readdirSync(dir).filter(f => f.startsWith(prefix + '_') && f.endsWith('.json'));
    if (made.length !== 1) throw new Error(`profile: ONNX Runtime wrote ${made.length} traces in ${dir}`);
    fs.renameSync(path.join(dir, made[0]), o.profile);
    console.log(`profile: ${o.profile} (${Math.max(1, o.warmup) + o.reps} runs)`);
  }
})().catch(e => { console.error(`ort_run: ${e.message}`); process.exit(1); });
