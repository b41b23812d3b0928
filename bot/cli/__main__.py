"""`python -m bot.cli …`, the same as `gpubot …`."""

import sys

from bot.cli.main import main

sys.exit(main())
