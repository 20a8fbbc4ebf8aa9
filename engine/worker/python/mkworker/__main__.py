"""``python -m mkworker``: the runtime worker (docs/protocol.md), run under its
guard (mkworker/guard.py) so that everything it starts can be ended with it."""

import sys

from mkworker import guard

guard.start()

from mkworker.server import main  # noqa: E402  (after the fork: the guard stays small)

sys.exit(main())
