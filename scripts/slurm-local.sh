#!/usr/bin/env bash
# A one-machine Slurm cluster for tests: munged, slurmctld and slurmd on
# localhost, everything (config, state, keys, sockets, logs) in DIR, on
# ports of its own, so that it touches no system Slurm or munge.
#   scripts/slurm-local.sh install        apt-get install slurm-wlm munge (root only)
#   scripts/slurm-local.sh start DIR [CPUS]   prints SLURM_CONF=DIR/slurm.conf; exit 1 with
#                                             the reason on stderr when it cannot start
#   scripts/slurm-local.sh stop DIR
# Needs root (slurmd starts the tasks as their user).
set -euo pipefail
cmd=${1:-}
dir=${2:-}

have_slurm() { command -v sbatch >/dev/null && command -v slurmctld >/dev/null &&
               command -v slurmd >/dev/null && command -v munged >/dev/null; }

case "$cmd" in
install)
  have_slurm && exit 0
  [ "$(id -u)" = 0 ] || { echo "slurm-local: not root: cannot install slurm-wlm and munge" >&2; exit 1; }
  command -v apt-get >/dev/null || { echo "slurm-local: no apt-get to install slurm-wlm" >&2; exit 1; }
  apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1 ||
    { echo "slurm-local: apt-get install slurm-wlm munge failed" >&2; exit 1; }
  have_slurm || { echo "slurm-local: slurm-wlm installed but its commands are missing" >&2; exit 1; }
  ;;
start)
  [ -n "$dir" ] || { echo "usage: slurm-local.sh start DIR [CPUS]" >&2; exit 2; }
  have_slurm || { echo "slurm-local: Slurm is not installed (slurm-wlm, munge)" >&2; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "slurm-local: slurmd needs root" >&2; exit 1; }
  cpus=${3:-$(nproc)}
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 700 "$dir/munge"
  head -c 1024 /dev/urandom > "$dir/munge/key"
  chmod 400 "$dir/munge/key"
  munged --force -S "$dir/munge/sock" --key-file="$dir/munge/key" --pid-file="$dir/munge/pid" \
    --log-file="$dir/munge/log" --seed-file="$dir/munge/seed" ||
    { echo "slurm-local: munged did not start: $(tail -2 "$dir/munge/log" 2>/dev/null)" >&2; exit 1; }
  port=$((20000 + RANDOM % 20000))
  cat > "$dir/slurm.conf" <<EOF
ClusterName=mklocal
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldPort=$port
SlurmdPort=$((port + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MinJobAge=3600
KillWait=5
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
NodeName=mknode NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=mknode Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld || { echo "slurm-local: slurmctld did not start: $(tail -3 "$dir/slurmctld.log" 2>/dev/null)" >&2; exit 1; }
  slurmd -N mknode || { echo "slurm-local: slurmd did not start: $(tail -3 "$dir/slurmd.log" 2>/dev/null)" >&2; exit 1; }
  for _ in $(seq 60); do
    [ "$(sinfo -h -o %t 2>/dev/null)" = idle ] && { echo "SLURM_CONF=$SLURM_CONF"; exit 0; }
    sleep 0.5
  done
  echo "slurm-local: the node did not become idle: $(sinfo 2>&1 | tail -1); $(tail -2 "$dir/slurmd.log" 2>/dev/null)" >&2
  exit 1
  ;;
stop)
  [ -n "$dir" ] || exit 0
  for f in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/pid"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  done
  ;;
*)
  echo "usage: slurm-local.sh install | start DIR [CPUS] | stop DIR" >&2
  exit 2
  ;;
esac
