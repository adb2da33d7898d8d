"""The Android domain: emulator fleets driven through Appium (UiAutomator2); tested here with Appium's
fake driver and a stand-in emulator, since no emulator can run on our machines."""
