#!/bin/bash
# STAND-IN for the Android SDK `avdmanager`, for the fleet tests only (no system image can be installed here).
# `avdmanager create avd -n NAME -k PACKAGE [-d DEVICE] [-p PATH] [-f]` as the real one lays an AVD out:
# the package must exist under the SDK (system-images;android-34;google_apis;x86_64 ->
# <sdk>/system-images/android-34/google_apis/x86_64), the custom-hardware question is read from stdin,
# <ANDROID_AVD_HOME>/NAME.ini points at the AVD directory, whose config.ini names the image.
sdk="${ANDROID_SDK_ROOT:-$(cd "$(dirname "$(readlink -f "$0")")/sdk" && pwd)}"
home="${ANDROID_AVD_HOME:-$HOME/.android/avd}"
if [ "$1 $2" != "create avd" ]; then echo "Error: the stand-in avdmanager only knows 'create avd'" >&2; exit 1; fi
shift 2
name="" package="" device="" path="" force=""
while [ $# -gt 0 ]; do
    case "$1" in
        -n|--name) name="$2"; shift 2 ;;
        -k|--package) package="$2"; shift 2 ;;
        -d|--device) device="$2"; shift 2 ;;
        -p|--path) path="$2"; shift 2 ;;
        -f|--force) force=1; shift ;;
        *) echo "Error: Invalid argument $1" >&2; exit 1 ;;
    esac
done
if [ -z "$name" ] || [ -z "$package" ]; then echo "Error: The parameters --package, --name must be defined" >&2; exit 1; fi
image="${package//;//}"
if [ ! -d "$sdk/$image" ]; then
    echo "Error: Package path is not valid. Valid system image paths are:" >&2
    (cd "$sdk" && find system-images -mindepth 3 -maxdepth 3 -type d | tr / ';') >&2
    exit 1
fi
if [ -e "$home/$name.ini" ] && [ -z "$force" ]; then
    echo "Error: Android Virtual Device '$name' already exists." >&2; exit 1
fi
printf 'Do you wish to create a custom hardware profile? [no] '
read -r answer
path="${path:-$home/$name.avd}"
mkdir -p "$path" "$home"
IFS=/ read -r _ api tag abi <<< "$image"
{
    echo "AvdId=$name"; echo "avd.ini.displayname=$name"; echo "abi.type=$abi"; echo "hw.cpu.arch=$abi"
    echo "image.sysdir.1=$image/"; echo "tag.id=$tag"; echo "hw.device.name=${device:-}"
    echo "standin.custom_hardware_answer=${answer:-no}"
} > "$path/config.ini"
{ echo "avd.ini.encoding=UTF-8"; echo "path=$path"; echo "path.rel=avd/$name.avd"; echo "target=$api"; } > "$home/$name.ini"
echo
