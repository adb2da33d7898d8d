#!/usr/bin/env -S python3 -IS
"""STAND-IN for the Android SDK `emulator` program, for the fleet tests only (no real emulator can run here).

It accepts the command line the fleet uses (`-avd NAME` or `@NAME`, `-port N` or `-ports C,A`, `-grpc N`,
the headless flags) and behaves like a booting emulator from outside:
- it finds the AVD as the emulator does (ANDROID_AVD_HOME/NAME.ini -> path= -> config.ini) and stops with
  "Unknown AVD name" when it is missing; without -read-only a second instance of one AVD is refused;
- it listens on the console port (a minimal console: `ping`, `avd name`, `kill`), the adb port and the gRPC
  port, and stops with an error when one of them is in use;
- it runs one child process (`sleep`), as the real launcher runs QEMU, and stops it on a clean exit only;
- it publishes its state for the stand-in adb under $STANDIN_ANDROID_STATE/emulator-<console>/: `state` turns
  from offline to device after STANDIN_ADB_AFTER_S, `boot_completed` is written as 1 when the boot time has
  passed since the process started; each finished boot is appended to boots.jsonl with its real times.

Boot behaviour, from the AVD's config.ini (`standin.boot_s`, `standin.boot_never=yes`,
`standin.crash_after_s`), else from $STANDIN_BOOT_S (default 2.0); a one-off crash for the instance on
console port N is asked for by writing seconds into $STANDIN_ANDROID_STATE/control/N.crash_after_s
(consumed at start).
"""

import fcntl
import os
import select
import shutil
import signal
import socket
import sys
import time

FLAGS = {"-no-window", "-no-audio", "-no-boot-anim", "-read-only", "-no-snapshot-save", "-no-snapshot-load",
         "-no-snapshot", "-no-metrics", "-wipe-data", "-verbose"}  # fmt: skip
VALUED = {"-avd", "-port", "-ports", "-grpc", "-gpu", "-memory", "-cores", "-accel", "-camera-back"}


def fail(message):
    print(f"ERROR | {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def exec_time():
    """When this process was exec'd (wall clock), from /proc: the interpreter's start-up is part of the
    boot."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


def parse(argv):
    opts, flags, i = {}, set(), 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("@"):
            opts["-avd"] = arg[1:]
        elif arg in FLAGS or arg == "-list-avds":
            flags.add(arg)
        elif arg in VALUED:
            if i + 1 >= len(argv):
                fail(f"Missing argument for option {arg}")
            opts[arg] = argv[i + 1]
            i += 1
        else:
            fail(f"Invalid command-line parameter: {arg}.")
        i += 1
    return opts, flags


def read_ini(path):
    values = {}
    with open(path) as f:
        for line in f:
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip()] = value.strip()
    return values


def listen(port, what):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        fail(f"{what} port {port} is used by another program; choose another with -port/-ports")
    sock.listen(8)
    return sock


def main():
    started = exec_time()
    opts, flags = parse(sys.argv[1:])
    home = os.environ.get("ANDROID_AVD_HOME") or os.path.expanduser("~/.android/avd")
    if "-list-avds" in flags:
        print("\n".join(sorted(n[:-4] for n in os.listdir(home) if n.endswith(".ini"))))
        return
    state_root = os.environ.get("STANDIN_ANDROID_STATE") or fail("stand-in: STANDIN_ANDROID_STATE is not set")
    avd = opts.get("-avd") or fail("No AVD specified. Use '@foo' or '-avd foo' to launch a virtual device")
    if not os.path.isfile(os.path.join(home, f"{avd}.ini")):
        fail(f"Unknown AVD name [{avd}], use -list-avds to see valid list.")
    avd_dir = read_ini(os.path.join(home, f"{avd}.ini")).get("path") or os.path.join(home, f"{avd}.avd")
    config = read_ini(os.path.join(avd_dir, "config.ini"))

    lock = open(os.path.join(avd_dir, "standin-instances.lock"), "w")
    try:
        fcntl.flock(lock, (fcntl.LOCK_SH if "-read-only" in flags else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError:
        fail("Running multiple emulators with the same AVD is an experimental feature. "
             "Please use -read-only flag to enable this feature.")  # fmt: skip

    if "-ports" in opts:
        console, adb = (int(p) for p in opts["-ports"].split(","))
    else:
        console = int(opts.get("-port", "5554"))
        adb = console + 1
    if console % 2 or console < 5554:
        fail(f"Invalid console port {console}: an even number from 5554 is expected")
    sockets = [listen(console, "console"), listen(adb, "adb")]
    if "-grpc" in opts:
        sockets.append(listen(int(opts["-grpc"]), "gRPC"))
    console_sock = sockets[0]

    serial = f"emulator-{console}"
    here = os.path.join(state_root, serial)
    shutil.rmtree(here, ignore_errors=True)  # what a crashed predecessor on this port left
    os.makedirs(os.path.join(here, "settings", "global"))

    def put(name, value):
        with open(os.path.join(here, name + ".tmp"), "w") as f:
            f.write(value)
        os.replace(os.path.join(here, name + ".tmp"), os.path.join(here, name))

    put("avd", avd)
    put("state", "offline")
    put("pid", str(os.getpid()))
    # The real `emulator` launcher runs QEMU as a child process; this child stands for it, so that a fleet
    # that kills only the launcher (not its process group) leaves something behind the tests can see.
    child = os.posix_spawnp("sleep", ["sleep", "86400"], os.environ)

    def leave(*_):
        os.kill(child, signal.SIGTERM)
        shutil.rmtree(here, ignore_errors=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGINT, leave)

    boot_s = float(config.get("standin.boot_s") or os.environ.get("STANDIN_BOOT_S", "2.0"))
    never = config.get("standin.boot_never") == "yes"
    crash_after = config.get("standin.crash_after_s")
    control = os.path.join(state_root, "control", f"{console}.crash_after_s")
    if os.path.exists(control):
        with open(control) as f:
            crash_after = f.read().strip()
        os.remove(control)
    events = {"adb": started + float(os.environ.get("STANDIN_ADB_AFTER_S", min(0.2, boot_s / 2)))}
    if not never:
        events["boot"] = started + boot_s
    if crash_after:
        events["crash"] = started + float(crash_after)

    clients = []
    while True:
        now = time.time()
        for name, at in sorted(events.items(), key=lambda e: e[1]):
            if at > now:
                continue
            del events[name]
            if name == "crash":
                print("stand-in: simulated crash", file=sys.stderr, flush=True)
                os._exit(3)  # no clean-up: adb must notice the process is gone
            if name == "adb":
                put("state", "device")
            if name == "boot":
                put("boot_completed", "1")
                with open(os.path.join(state_root, "boots.jsonl"), "a") as f:
                    f.write(
                        f'{{"serial": "{serial}", "avd": "{avd}", "exec_at": {started}, '
                        f'"booted_at": {time.time()}, "boot_s": {boot_s}}}\n'
                    )  # json, without importing it
        wait = max(0.0, min(events.values()) - time.time()) if events else None
        readable, _, _ = select.select([console_sock, *clients], [], [], wait)
        for sock in readable:
            if sock is console_sock:
                client, _ = console_sock.accept()
                client.sendall(b"Android Console: type 'help' for a list of commands\r\nOK\r\n")
                clients.append(client)
                continue
            line = sock.recv(1024).decode(errors="replace").strip()
            if not line:
                clients.remove(sock)
                sock.close()
            elif line == "kill":
                sock.sendall(b"OK: killing emulator, bye bye\r\n")
                leave()
            elif line == "ping":
                sock.sendall(b"I am alive!\r\nOK\r\n")
            elif line == "avd name":
                sock.sendall(f"{avd}\r\nOK\r\n".encode())
            else:
                sock.sendall(b"KO: unknown command, try 'help'\r\n")


if __name__ == "__main__":
    main()
