"""Web collector: `python -m collectors.web`, its embedded tasks and its explorer policy."""
