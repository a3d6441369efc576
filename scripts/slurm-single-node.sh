#!/usr/bin/env bash
# A one-node Slurm cluster on this machine (Debian's slurm-wlm and munge, with job accounting:
# slurmdbd on a local MariaDB, since submitit follows its jobs with sacct), to try
# `python -m workbench.experiments ... --executor slurm` without a cluster; tests/test_slurm.py uses it.
#
#   scripts/slurm-single-node.sh start   install slurm-wlm, munge, slurmdbd and mariadb-server if missing
#                                        (apt-get), write a one-node slurm.conf and slurmdbd.conf, start
#                                        munged, mariadbd, slurmdbd, slurmctld and slurmd
#   scripts/slurm-single-node.sh check   the same, but never installs: fails if Slurm is not installed
#   scripts/slurm-single-node.sh stop    stop the daemons this script started
#
# Root only. The node offers this machine's cores and memory in one partition, "debug" (the default,
# no time limit). A slurm.conf or slurmdbd.conf that this script did not write is left alone (the
# script stops with a message). The database listens on its socket only and lets root in by MariaDB's
# unix-socket login: no password anywhere. Logs: /var/log/slurm/. Exit status 0: the cluster answers
# sinfo and sacct.
set -euo pipefail

ACTION=${1:-start}
CONF=/etc/slurm/slurm.conf
DBD_CONF=/etc/slurm/slurmdbd.conf
PACKAGES="slurm-wlm munge slurmdbd mariadb-server"
MARK="# written by workbench scripts/slurm-single-node.sh"
STATE=/run/workbench-slurm   # PID files of the daemons this script started
LOGS=/var/log/slurm

fail() { echo "slurm-single-node: $*" >&2; exit 1; }

answers() { timeout 10 sinfo --noheader >/dev/null 2>&1 && timeout 10 sacct --noheader >/dev/null 2>&1; }

stop() {  # the daemons this script started, the last started first
  if [ -s "$STATE/slurmctld.pid" ]; then  # let ending jobs report their end (30 s), cancel the others
    for _ in $(seq 30); do [ -z "$(timeout 5 squeue --noheader 2>/dev/null)" ] && break; sleep 1; done
    timeout 10 scancel --full --user "$(id -un)" 2>/dev/null || true
    for _ in $(seq 10); do [ -z "$(timeout 5 squeue --noheader 2>/dev/null)" ] && break; sleep 1; done
  fi
  for name in slurmd slurmctld slurmdbd mariadb munged; do
    local pidfile="$STATE/$name.pid" pid
    [ -s "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    rm -f "$pidfile"
  done
}

installed() {
  for tool in slurmctld slurmd slurmdbd munged mariadbd sbatch; do command -v "$tool" >/dev/null || return 1; done
}

install_if_missing() {
  installed && return
  [ "$ACTION" = start ] || fail "Slurm is not installed ($PACKAGES; 'scripts/slurm-single-node.sh start' installs them)"
  command -v apt-get >/dev/null || fail "no apt-get: install $PACKAGES by hand"
  apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null
}

ours() {  # a config file this script may write: absent, or written by it
  [ ! -e "$1" ] || grep -qF "$MARK" "$1" || fail "$1 exists and was not written by this script: not touching it"
}

write_configs() {
  ours "$CONF"
  ours "$DBD_CONF"
  local host cpus memory
  host=$(hostname -s)
  cpus=$(nproc)
  memory=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))  # MB, 1 GB left to the system
  mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd "$LOGS" "$STATE"
  cat > "$CONF" <<END
$MARK
ClusterName=workbench
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
JobRequeue=0
KillWait=0
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
NodeName=$host CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
END
  cat > "$DBD_CONF" <<END
$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=slurm_acct_db
PidFile=$STATE/slurmdbd.pid
LogFile=$LOGS/slurmdbd.log
END
  chmod 600 "$DBD_CONF"
}

start_munge() {
  munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return
  [ -s /etc/munge/munge.key ] || { mkdir -p /etc/munge; dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /etc/munge/munge.key /run/munge /var/log/munge /var/lib/munge
  chmod 400 /etc/munge/munge.key
  runuser -u munge -- munged --force
  cp /run/munge/munged.pid "$STATE/munged.pid"
  munge -n | unmunge >/dev/null || fail "munged does not answer"
}

start_database() {
  mariadb -e "select 1" >/dev/null 2>&1 && return
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
  setsid mariadbd --user=mysql --skip-networking >> "$LOGS/mariadb.log" 2>&1 < /dev/null &
  for _ in $(seq 60); do
    if mariadb -e "select 1" >/dev/null 2>&1; then cp /run/mysqld/mysqld.pid "$STATE/mariadb.pid"; return; fi
    sleep 0.5
  done
  fail "mariadbd did not start (see $LOGS/mariadb.log)"
}

start() {
  [ "$(id -u)" = 0 ] || fail "must run as root (it installs packages and starts daemons)"
  install_if_missing
  if answers; then echo "slurm-single-node: a Slurm cluster already answers"; sinfo; return; fi
  write_configs
  start_munge
  start_database
  [ -s "$STATE/slurmdbd.pid" ] && kill -0 "$(cat "$STATE/slurmdbd.pid")" 2>/dev/null || slurmdbd \
    || fail "slurmdbd did not start (see $LOGS/slurmdbd.log)"
  for _ in $(seq 30); do timeout 5 sacctmgr --noheader show cluster >/dev/null 2>&1 && break; sleep 1; done
  [ -s "$STATE/slurmctld.pid" ] && kill -0 "$(cat "$STATE/slurmctld.pid")" 2>/dev/null || slurmctld \
    || fail "slurmctld did not start (see $LOGS/slurmctld.log)"
  [ -s "$STATE/slurmd.pid" ] && kill -0 "$(cat "$STATE/slurmd.pid")" 2>/dev/null || slurmd \
    || fail "slurmd did not start (see $LOGS/slurmd.log)"
  for _ in $(seq 30); do
    if answers && sinfo --noheader --format=%t | grep -qE '^(idle|mix|alloc)'; then sinfo; return; fi
    sleep 1
  done
  fail "the cluster did not come up in 30 s: $(sinfo --noheader 2>&1 | head -1) (see $LOGS/)"
}

case "$ACTION" in
  start | check) start ;;
  stop) stop ;;
  *) fail "unknown action '$ACTION' (start, check or stop)" ;;
esac
