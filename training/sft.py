"""`python -m training.sft`: supervised fine-tuning on SFT samples (OUT/sft); see `--help`."""

import sys

from training.loop import main

if __name__ == "__main__":
    sys.exit(main("sft"))
