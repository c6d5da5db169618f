"""python3 -m export ID [ID...] [--out-dir DIR] [--results FILE]: see export.cli."""
import sys

from export.cli import main

sys.exit(main())
