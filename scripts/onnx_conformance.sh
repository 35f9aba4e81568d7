#!/usr/bin/env bash
# Runs the ONNX conformance test (Debian's libonnx-testdata node cases of the importer's operators,
# fp32, NCHW and NHWC) and writes its per-op table into docs/onnx.md between the markers
# "<!-- conformance:begin -->" and "<!-- conformance:end -->".
#   scripts/onnx_conformance.sh [build dir, default build/dev]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/dev}
exe=$(ls "$build"/tests/onnx_conformance_* 2>/dev/null | head -1)
[[ -x $exe ]] || { echo "no onnx_conformance test in $build (configure with KFUSE_ONNX=ON and build it)" >&2; exit 2; }
table=$(mktemp)
KFUSE_ONNX_TABLE=$table "$exe" >/dev/null
python3 - "$table" docs/onnx.md <<'PY'
import sys
table, doc = open(sys.argv[1]).read(), sys.argv[2]
text = open(doc).read()
b, e = "<!-- conformance:begin -->", "<!-- conformance:end -->"
i, j = text.index(b) + len(b), text.index(e)
open(doc, "w").write(text[:i] + "\n" + table.strip() + "\n" + text[j:])
PY
rm -f "$table"
head -1 "$(dirname "$0")/../docs/onnx.md" >/dev/null
echo "docs/onnx.md: conformance table updated"
