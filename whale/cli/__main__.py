import sys

from whale.cli import main

sys.exit(main())
