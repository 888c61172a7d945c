"""``python -m audits`` is the ``recaudit`` command."""
import sys

from .cli import main

sys.exit(main())
