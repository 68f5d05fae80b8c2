import sys

from bwd_suite.cli import main

sys.exit(main())
