"""``python -m mkworker``: the runtime worker (docs/protocol.md)."""

import sys

from mkworker.server import main

sys.exit(main())
