#!/usr/bin/env bash
# C unit and integration tests (ASan/UBSan build) through ctest.
set -euo pipefail
ctest --test-dir "${MK_BUILD_DIR:-build-asan}" --output-on-failure -j 2
