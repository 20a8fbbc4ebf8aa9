#!/usr/bin/env bash
# Issue #18 item 5 on a GPU: save an edited variant -> its diagnostics, warm
# (scripts/bench-lsp-save.mjs against the devkit's server, the machine's
# Python worker, --backend auto). The GPU machine has no Node: carry a
# compressed one in .node/node.xz (xz -c /usr/bin/node > .node/node.xz here)
# and editors/vscode/node_modules/vscode-jsonrpc (the client's one package).
#   carry: .devkit .node editors/vscode/node_modules/vscode-jsonrpc
# The report comes back as $OUT/lsp-save-gpu.md.
set -uo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/cuda-env.sh"
node=/tmp/mk-node
[ -x "$node" ] || { xz -dc "$root/.node/node.xz" > "$node" && chmod +x "$node"; } || exit 1
cd "$root"
timeout "${LSP_SAVE_SECONDS:-240}" "$node" scripts/bench-lsp-save.mjs --bin "$MK" --python "$MKEVOLVE_PYTHON" \
  --backend auto --n "${LSP_SAVE_N:-10}" --out "$OUT/lsp-save-gpu.md" 2>&1 | tail -30
cat "$OUT/lsp-save-gpu.md" 2>/dev/null | sed -n '/^| save/,/^$/p'
