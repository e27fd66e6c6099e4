import sys

from vastml.cli import main

sys.exit(main())
