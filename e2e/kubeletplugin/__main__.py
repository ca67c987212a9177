import sys

from e2e.kubeletplugin.cli import main

sys.exit(main())
