#!/usr/bin/env bash
# Product files speak of the product: no file of the repository (sources, scripts, README, docs
# and measurement logs) may name the development process (the patterns below: tracker numbers,
# numbered work steps, the VM a run happened on, a work period). kfuse::llm's `session` (one
# conversation's KV cache) is a product name and is not matched. Run by
# scripts/test.sh in its format check; prints each offending line and exits 1, else one line.
#
#   scripts/check_words.sh
set -euo pipefail
cd "$(dirname "$0")/.."

self=scripts/check_words.sh
words='\bissues? #?[0-9]|\bstops? [0-9]|\bstop-[0-9]|\bthe bri[e]f\b|\breview[ ]mend|\bthis VM\b'
words+='|\b(this|last|next|previous) session\b'

# Tracked files and new ones not yet added (ignored files excepted), all but this script.
if git grep --untracked -nIiE "$words" -- . ":(exclude)$self"; then
  echo "words: the lines above carry process words; say what the product does instead" >&2
  exit 1
fi
n=$(git ls-files --cached --others --exclude-standard | grep -vxF "$self" | sort -u | wc -l)
echo "words: $n files clean"
