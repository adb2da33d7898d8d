"""Android domain collector: `python -m collectors.android --emulators N --avd NAME --out DIR`."""
