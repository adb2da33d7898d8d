#!/bin/bash
# STAND-IN for the Android SDK `adb` program, for the fleet tests only (no real emulator can run here).
# It reads what the stand-in emulators publish under $STANDIN_ANDROID_STATE/emulator-<port>/ and answers
# the commands the fleet uses, with adb's output formats:
#   adb devices | adb -s SERIAL wait-for-device | adb -s SERIAL get-state
#   adb -s SERIAL shell getprop sys.boot_completed | adb -s SERIAL shell settings put|get global KEY [VALUE]
#   (several commands in one `adb shell`, separated by `;` words, as a device shell runs them)
#   adb -s SERIAL emu kill (through the emulator's console port, as adb does) | adb start-server|kill-server
# Written in bash so that each call costs what a real adb client does (milliseconds), not a Python start-up.
state_root="${STANDIN_ANDROID_STATE:?stand-in adb: STANDIN_ANDROID_STATE is not set}"
serial="${ANDROID_SERIAL:-}"
if [ "$1" = "-s" ]; then serial="$2"; shift 2; fi
command="$1"
shift

# Builtins only (read, not cat; read -t on a silent FIFO, not sleep): a poll must not fork.
alive() {  # the emulator behind serial $1 runs (a zombie, or a leftover directory, does not count)
    local pid stat
    pid=""
    { read -r pid < "$state_root/$1/pid"; } 2>/dev/null  # non-zero at a missing final newline: test pid
    [ -n "$pid" ] || return 1
    { read -r stat < "/proc/$pid/stat"; } 2>/dev/null || return 1
    stat="${stat##*) }"
    [ "${stat%% *}" != "Z" ]
}

read_state() {  # sets st to the device state of serial $1 (offline, device), empty when there is none
    st=""
    { read -r st < "$state_root/$1/state"; } 2>/dev/null
    return 0
}

need_device() {
    if [ -z "$serial" ]; then echo "adb: no devices/emulators found (use -s SERIAL)" >&2; exit 1; fi
    if ! alive "$serial"; then echo "adb: device '$serial' not found" >&2; exit 1; fi
}

device_command() {  # one command of the stand-in device's shell: getprop and settings, nothing else
    case "$1 $2" in
        "getprop sys.boot_completed")
            value=""; { read -r value < "$dir/boot_completed"; } 2>/dev/null; echo "$value" ;;
        "getprop "*) echo ;;
        "settings put")
            { [ -d "$dir/settings/$3" ] || mkdir -p "$dir/settings/$3"; } && printf '%s' "$5" > "$dir/settings/$3/$4" ;;
        "settings get") cat "$dir/settings/$3/$4" 2>/dev/null || printf 'null'; echo ;;
        *) echo "/system/bin/sh: $1: inaccessible or not found" >&2; return 127 ;;
    esac
}

case "$command" in
    devices)
        echo "List of devices attached"
        for dir in "$state_root"/emulator-*/; do
            [ -d "$dir" ] || continue
            name="${dir%/}"; name="${name##*/}"
            if alive "$name"; then read_state "$name"; printf '%s\t%s\n' "$name" "$st"; fi
        done
        echo
        ;;
    wait-for-device)
        fifo="$state_root/.adb-wait-$$"
        mkfifo "$fifo" && exec {silent}<>"$fifo" && rm -f "$fifo"  # open, never written: `read -t` waits
        while ! { alive "$serial" && read_state "$serial" && [ "$st" = device ]; }; do
            read -r -t 0.05 -u "$silent"
        done
        exit 0
        ;;
    get-state)
        need_device
        read_state "$serial"; echo "$st"
        ;;
    shell)
        need_device
        read_state "$serial"
        if [ "$st" != device ]; then echo "adb: device offline" >&2; exit 1; fi
        dir="$state_root/$serial"
        words=()
        for word in "$@" ";"; do  # the device shell runs `;`-separated commands one after the other
            if [ "$word" != ";" ]; then words+=("$word"); continue; fi
            device_command "${words[@]}" || exit $?
            words=()
        done
        ;;
    emu)
        need_device
        port="${serial#emulator-}"
        exec 3<>"/dev/tcp/127.0.0.1/$port" || { echo "adb: cannot reach the console of $serial" >&2; exit 1; }
        read -r -t 2 _banner <&3; read -r -t 2 _ok <&3
        printf '%s\r\n' "$*" >&3
        read -r -t 2 reply <&3
        echo "${reply%$'\r'}"
        ;;
    start-server|kill-server) ;;
    version) echo "Android Debug Bridge version 1.0.41 (stand-in for the fleet tests)" ;;
    *) echo "adb: unknown command $command" >&2; exit 1 ;;
esac
