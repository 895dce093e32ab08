#!/usr/bin/env bash
# Prints the fortune files of Debian packages, one path a line in byte order:
# the text files that the packages named (default: `fortunes` and
# `fortunes-min`, the demo's English corpus) install under
# /usr/share/games/fortunes. Other languages' packages (fortunes-de, -ru, -zh,
# ...) add files and folders to the same place, so a corpus is read by
# package, not by folder. *.dat are strfile's binary indexes, *.u8 symlinks
# (or empty files) beside the text files.
#   launch/fortunes-files.sh                 # English
#   launch/fortunes-files.sh fortunes-ru     # Russian
set -euo pipefail
dir=/usr/share/games/fortunes
packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(fortunes fortunes-min)
if ! installed=$(dpkg-query -L "${packages[@]}" 2>&1); then
  echo "fortunes-files.sh: $installed (launch/install-deps.sh installs them)" >&2
  exit 1
fi
while read -r path; do
  case "$path" in
    "$dir"/*.dat | "$dir"/*.u8) ;;
    "$dir"/*) if [ -f "$path" ] && [ ! -L "$path" ]; then echo "$path"; fi ;;
  esac
done <<<"$installed" | LC_ALL=C sort -u
