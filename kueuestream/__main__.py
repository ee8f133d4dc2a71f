"""``python -m kueuestream``: the same command line as the ``kueuestream`` script."""

import sys

from kueuestream.agents.cli.main import main

sys.exit(main())
