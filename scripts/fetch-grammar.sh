#!/usr/bin/env bash
# Fetches the tree-sitter-python grammar's generated parser from the npm
# registry into third_party/ and checks the tarball against a pinned sha256.
# The generated files are never committed.
set -euo pipefail
VERSION=0.23.6
SHA256=aab5b860d93dbf84b37fed532f7dacc0468ede5387d0c74911d68f964287662a
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/third_party/tree-sitter-python"
[ -f "$dest/src/parser.c" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "tree-sitter-python@$VERSION" >/dev/null)
tarball="$tmp/tree-sitter-python-$VERSION.tgz"
echo "$SHA256  $tarball" | sha256sum -c --quiet - || {
  echo "fetch-grammar: sha256 mismatch for tree-sitter-python@$VERSION" >&2; exit 1; }
mkdir -p "$dest"
tar -xzf "$tarball" -C "$tmp"
cp -r "$tmp/package/src" "$dest/"
cp "$tmp/package/LICENSE" "$dest/" 2>/dev/null || true
echo "$VERSION" > "$dest/VERSION"
