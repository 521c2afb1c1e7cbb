"""``python -m benchmarks``: run every benchmark, then regenerate the README's results."""

import sys

from benchmarks.runner import main

if __name__ == "__main__":
    sys.exit(main())
