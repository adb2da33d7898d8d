"""The OS domain: real Linux desktops (Xvfb, AT-SPI, real applications) locally, over SSH and in QEMU."""
