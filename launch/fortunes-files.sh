#!/usr/bin/env bash
# Prints the English fortune files, one path a line in byte order: the text
# files that Debian's packages `fortunes` and `fortunes-min` install under
# /usr/share/games/fortunes. Other languages' packages (fortunes-de, -ru, -zh,
# ...) add files and folders to the same place, so the English corpus is read
# by package, not by folder. *.dat are strfile's binary indexes, *.u8
# symlinks to the text files.
set -euo pipefail
dir=/usr/share/games/fortunes
if ! installed=$(dpkg-query -L fortunes fortunes-min 2>&1); then
  echo "fortunes-files.sh: $installed (launch/install-deps.sh installs them)" >&2
  exit 1
fi
while read -r path; do
  case "$path" in
    "$dir"/*.dat | "$dir"/*.u8) ;;
    "$dir"/*) if [ -f "$path" ] && [ ! -L "$path" ]; then echo "$path"; fi ;;
  esac
done <<<"$installed" | LC_ALL=C sort -u
