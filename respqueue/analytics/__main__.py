"""``python -m respqueue.analytics SRC OUT [--master M]``."""

import sys

from respqueue.analytics.job import main

sys.exit(main())
