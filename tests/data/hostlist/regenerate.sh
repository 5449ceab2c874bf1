#!/usr/bin/env bash
# Regenerates scontrol_cases.tsv from the real `scontrol show hostnames` (Debian slurm-client):
# the ground truth of the hostlist tests. One line per expression: the expression, a TAB, then
# the hosts separated by single spaces, or "ERROR" when scontrol rejects it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
conf=$(mktemp)
trap 'rm -f "$conf"' EXIT
printf 'ClusterName=probe\nSlurmctldHost=localhost\nAuthType=auth/none\nCredType=cred/none\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n' >"$conf"
out="$here/scontrol_cases.tsv"
: >"$out"
while IFS= read -r expr; do
  [ -z "$expr" ] && continue
  result=$(SLURM_CONF="$conf" scontrol show hostnames "$expr" 2>&1 || true)
  if grep -q "Invalid hostlist" <<<"$result"; then
    printf '%s\tERROR\n' "$expr" >>"$out"
  else
    printf '%s\t%s\n' "$expr" "$(tr '\n' ' ' <<<"$result" | sed 's/ $//')" >>"$out"
  fi
done <"$here/expressions.txt"
echo "wrote $out ($(wc -l <"$out") cases) with $(SLURM_CONF="$conf" scontrol --version)"
