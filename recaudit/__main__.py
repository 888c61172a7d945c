"""``python -m recaudit`` is the ``recaudit`` command."""
import sys

from recaudit.audits.cli import main

sys.exit(main())
