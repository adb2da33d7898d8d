"""Search collector: `python -m collectors.search`, its embedded tasks and its explorer policy."""
