#!/usr/bin/env bash
# Debian's fortune collections in ten languages, prepared as one dataset per
# language, all encoded with one tokenizer trained on all of them (so they can
# be mixed as [[data.sources]] and validated as [[eval.sets]]). Run from the
# repository root:
#   data_prep/fortunes-multilingual.sh OUT [MOELAB_BINARY]
# Writes OUT/text/LANG/ (the cleaned text), OUT/all (every language: its
# tokenizer is everyone's) and OUT/LANG for each language below, or for those
# MOELAB_ML_LANGUAGES names ("bg zh": its test's quick subset).
set -euo pipefail

out=${1:?usage: fortunes-multilingual.sh OUT [MOELAB_BINARY]}
moelab=${2:-build/bin/moelab}
vocab=${MOELAB_ML_VOCAB:-8192}

# language code: its Debian packages (fortunes-br is Brazilian Portuguese,
# fortunes-cs Czech and Slovak).
languages=(
  "en:fortunes fortunes-min" "de:fortunes-de" "es:fortunes-es" "it:fortunes-it"
  "pt:fortunes-br" "cs:fortunes-cs" "pl:fortunes-pl" "ru:fortunes-ru"
  "bg:fortunes-bg" "zh:fortunes-zh"
)
if [ -n "${MOELAB_ML_LANGUAGES:-}" ]; then
  chosen=()
  for entry in "${languages[@]}"; do
    [[ " $MOELAB_ML_LANGUAGES " == *" ${entry%%:*} "* ]] && chosen+=("$entry")
  done
  [ ${#chosen[@]} -gt 0 ] || { echo "MOELAB_ML_LANGUAGES='$MOELAB_ML_LANGUAGES' names no language of this script" >&2; exit 2; }
  languages=("${chosen[@]}")
fi

# A file's text as training should see it: without the ANSI colour codes the
# Chinese collections carry (ESC [ ... m) and with LF line ends (some Russian
# files have CRLF, which would hide their '%' separators).
clean() { sed -e 's/\x1b\[[0-9;]*m\?//g' -e 's/\r$//' "$1"; }

for entry in "${languages[@]}"; do
  lang=${entry%%:*}
  read -ra packages <<<"${entry#*:}"
  rm -rf "$out/text/$lang" && mkdir -p "$out/text/$lang"
  while read -r file; do
    name=${file#/usr/share/games/fortunes/}
    clean "$file" >"$out/text/$lang/${name//\//_}"
  done < <(launch/fortunes-files.sh "${packages[@]}")
done

# Every file of every language trains the tokenizer (byte fallback: a rare
# Chinese character becomes bytes, not <unk>).
"$moelab" prep --input "$out"/text/*/ --separator % --val-fraction 0.05 \
  --vocab-size "$vocab" --byte-fallback --tokenizer-sample-docs 1000000 --out "$out/all" --force
for entry in "${languages[@]}"; do
  lang=${entry%%:*}
  "$moelab" prep --input "$out/text/$lang/" --separator % --val-fraction 0.1 \
    --tokenizer "$out/all/tokenizer.model" --out "$out/$lang" --force
done
for entry in "${languages[@]}"; do
  lang=${entry%%:*}
  printf '%s ' "$lang"
  "$moelab" prep --inspect "$out/$lang" | grep -m2 -i "tokens" | tr -s ' \n' ' '
  echo
done
