#!/usr/bin/env bash
# A real Slurm on this machine for tests: slurmctld and two slurmd "nodes" (n1, n2) sharing
# this host, configured in a directory of their own. Installs the Debian packages if needed.
#
#   scripts/slurm/test_cluster.sh start DIR    # prints `export SLURM_CONF=DIR/slurm.conf`
#   scripts/slurm/test_cluster.sh stop DIR     # stops every daemon it started, by pid
#
# Both nodes share one host and network namespace, so every port is distinct: slurmctld on
# 16817, the slurmds on 17001-17002, srun on 17100-17199. Authentication is off (auth/none):
# this is a private test cluster on one machine. The node names n1 and n2 are added to
# /etc/hosts (as 127.0.0.1) while it runs, since npu_run reads the master from the node list.
set -euo pipefail

action=${1:?usage: test_cluster.sh start|stop DIR}
dir=${2:?usage: test_cluster.sh start|stop DIR}

stop() {
  for pidfile in "$dir"/slurmd-*.pid "$dir"/slurmctld.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    # Bounded wait on the daemon's exit, then SIGKILL.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

# The node names must resolve, as on a real cluster: both are this host.
hosts_line="127.0.0.1 n1 n2 # npu_run-test-cluster"
if [ "$action" = stop ]; then
  stop
  sed -i '/# npu_run-test-cluster$/d' /etc/hosts
  exit 0
fi
grep -qF "$hosts_line" /etc/hosts || echo "$hosts_line" >>/etc/hosts

need=()
for p in slurmctld slurmd slurm-client munge; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$dir"/state "$dir"/spool/n1 "$dir"/spool/n2 "$dir"/log
user=$(id -un)
cat >"$dir/slurm.conf" <<CONF
ClusterName=npurun
SlurmctldHost=localhost
SlurmctldPort=16817
SlurmdPort=17000
SrunPortRange=17100-17199
AuthType=auth/none
# A requeued job waits cred_expire seconds before it may start again (default 120).
AuthInfo=cred_expire=5
CredType=cred/none
SlurmUser=$user
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
# Look at pending jobs every second (default 60), so a requeued job restarts promptly.
SchedulerParameters=sched_interval=1,sched_min_interval=100000
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=300
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=n[1-2] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[17001-17002] CPUs=4 State=UNKNOWN
PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
CONF

export SLURM_CONF="$dir/slurm.conf"
slurmctld -i
for n in n1 n2; do slurmd -N "$n"; done
# Wait (bounded) until both nodes are idle.
for _ in $(seq 100); do
  [ "$(sinfo -h -N -t idle -o %N 2>/dev/null | wc -l)" -ge 2 ] && break
  sleep 0.1
done
if [ "$(sinfo -h -N -t idle -o %N | wc -l)" -lt 2 ]; then
  echo "slurm test cluster did not come up; logs in $dir/log" >&2
  sinfo -N >&2 || true
  stop
  exit 1
fi
echo "export SLURM_CONF=$dir/slurm.conf"
