#!/usr/bin/env bash
# On the development machine, between two device calls of one resumable sweep
# (bench-defaults.sh): unpacks the records a call brought back into .kb, where
# the next call carries them from, without the call's work folder (run logs
# and caches: large, and not needed to resume). Run it at once: a device
# machine waits about 30 s for the next call.
#   scripts/device/resume.sh FILES_AT [NAME]   (NAME: bench-l2d, bench-l3d-auto, ...)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
files=${1:?usage: resume.sh FILES_AT [NAME]}
tgz=$(ls "$files"/${2:-bench-l*}.tgz 2>/dev/null | head -n 1)
[ -n "$tgz" ] || { echo "resume: no sweep archive in $files" >&2; exit 1; }
name=$(basename "$tgz" .tgz)
mkdir -p "$root/.kb"
tar xzf "$tgz" -C "$root/.kb/"
rm -rf "$root/.kb/$name/work"
echo "resume: $(ls "$root/.kb/$name/problems" | wc -l) records in .kb/$name"
