"""`python -m training.cpt`: continued pre-training on CPT documents (OUT/cpt); see `--help`."""

import sys

from training.loop import main

if __name__ == "__main__":
    sys.exit(main("cpt"))
