#!/usr/bin/env bash
# Writes npu_run's man page with help2man from the binary's own --help texts: the launch
# command's options, a section per subcommand, and docs/man/npu_run.h2m for the rest.
#   man_page.sh OUTPUT H2M_FILE NPU_RUN_COMMAND...   (the command may start with an emulator)
set -euo pipefail
out=$1 h2m=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# help2man runs one executable by path; the wrapper carries the emulator, if any.
printf '#!/bin/sh\nexec %s "$@"\n' "$(printf '%q ' "$@")" >"$work/npu_run"
chmod +x "$work/npu_run"

troff_verbatim() { sed -e 's/\\/\\e/g' -e 's/^\([.'"'"']\)/\\\&\1/'; }
{
  cat "$h2m"
  # Right after OPTIONS: each subcommand's own --help, verbatim.
  echo "[>OPTIONS]"
  echo ".SH SUBCOMMANDS"
  echo "Each subcommand has its own options; \\fBnpu_run SUBCOMMAND \\-\\-help\\fR prints them."
  # The subcommands as `npu_run --help` lists them: its own --help where it has one, else the
  # line of the listing.
  "$work/npu_run" --help | sed -n '/^Subcommands/,$p' | sed -n 's/^  \([a-z][-a-z]*\)  *\(.*\)$/\1\t\2/p' |
    while IFS=$'\t' read -r sub summary; do
      echo ".SS \"npu_run $sub\""
      if help=$("$work/npu_run" "$sub" --help 2>/dev/null); then
        echo ".nf"
        troff_verbatim <<<"$help"
        echo ".fi"
      else
        echo "${summary^}."
      fi
    done
} >"$work/npu_run.h2m"
help2man --no-info --no-discard-stderr --section 1 --source "npu_run" \
  --name "launch multi-process distributed training, one worker per device" \
  --include "$work/npu_run.h2m" --output "$out" "$work/npu_run"
