import sys

from e2e.testbed.cli import main

sys.exit(main())
