"""Sim-vs-real fidelity of world models: `python -m training.fidelity --help`."""
