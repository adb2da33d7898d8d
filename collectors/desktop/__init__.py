"""Desktop (os) collector: `python -m collectors.desktop`, its embedded tasks and its explorer policy."""
