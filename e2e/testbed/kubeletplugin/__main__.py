import sys

from e2e.testbed.kubeletplugin.cli import main

sys.exit(main())
