import sys

from bwd_suite.suite.cli import main

sys.exit(main())
