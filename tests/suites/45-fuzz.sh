#!/usr/bin/env bash
# Fuzzes the server's framing + JSON-RPC (tests/fuzz/fuzz_lsp.c) with
# libFuzzer for a short while (MK_FUZZ_SECONDS, default 30) under ASan and
# UBSan with float-cast-overflow. Needs clang;
# installs it with apt when running as root, else skips with a message.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if ! command -v clang >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "45-fuzz: installing clang"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang >/dev/null || true
  fi
fi
if ! command -v clang >/dev/null; then
  echo "45-fuzz: skipped (clang with libFuzzer is not available)"
  exit 0
fi
out=${MK_FUZZ_DIR:-$root/build-fuzz}
mkdir -p "$out/obj" "$out/corpus"
grammar=third_party/tree-sitter-python/src
[ -f "$grammar/parser.c" ] || bash scripts/fetch-grammar.sh
# float-cast-overflow is not part of -fsanitize=undefined (nor checked by the
# GCC build of scripts/test.sh): ids, versions and positions are doubles from
# the peer, and a cast of a huge one to an integer is undefined behaviour.
cflags=(-g -O1 -std=c17 -D_GNU_SOURCE -fsanitize=fuzzer-no-link,address,undefined,float-cast-overflow
        -fno-sanitize-recover=undefined,float-cast-overflow -DMK_VERSION=\"fuzz\" -DMK_DEFAULT_PYTHON=\"python3\"
        -Ilsp -Ilsp/engine $(for d in engine/*/; do printf -- '-I%s ' "${d%/}"; done)
        $(pkg-config --cflags libuv libcjson tree-sitter libcurl sqlite3))
objs=()
# the session facade is stubbed: the fuzzer never starts Python workers; the
# static checks are the frontend's (engine/frontend/static_check.c)
for src in lsp/*.c lsp/engine/*.c engine/util/*.c engine/frontend/static_check.c \
           engine/propose/propose_backend_name.c \
           tests/fuzz/session_stub.c; do
  obj="$out/obj/$(basename "${src%.c}").o"
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ]; then clang "${cflags[@]}" -c "$src" -o "$obj"; fi
  objs+=("$obj")
done
for src in parser scanner; do # generated grammar: compiled once, no sanitizers needed
  obj="$out/obj/grammar_$src.o"
  [ -f "$obj" ] || clang -O1 -w -I"$grammar" -c "$grammar/$src.c" -o "$obj"
  objs+=("$obj")
done
clang "${cflags[@]}" -fsanitize=fuzzer tests/fuzz/fuzz_lsp.c "${objs[@]}" -o "$out/fuzz_lsp" \
  $(pkg-config --libs libuv libcjson tree-sitter) -lm
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
"$out/fuzz_lsp" -max_total_time="${MK_FUZZ_SECONDS:-30}" -max_len=65536 -rss_limit_mb=2048 \
  -print_final_stats=1 "$out/corpus" tests/fuzz/corpus 2>&1 | tail -n 15
echo "45-fuzz: no crash"
