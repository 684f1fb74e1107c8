"""``python -m compat.analytics SRC OUT [--master M]``."""

import sys

from compat.analytics.job import main

sys.exit(main())
