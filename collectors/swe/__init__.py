"""SWE collector: `python -m collectors.swe --sandboxes N --episodes M --out DIR` records read/edit/bash
episodes on mutated real repositories; `python -m collectors.swe prepare` downloads and builds them."""
