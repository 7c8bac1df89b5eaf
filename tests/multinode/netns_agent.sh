#!/usr/bin/env bash
# mpirun's launch agent for the namespace cluster (netns_cluster.sh), in ssh's place:
#   netns_agent.sh <host> <command words...>
# Like ssh, it joins the words into one shell command (mpirun quotes them for a remote
# shell) and runs it inside the host's network namespace, in a UTS namespace of its own
# whose hostname is <host>, so MPI sees each namespace as a node of its own. When
# NETNS_CLUSTER_LOCAL_DISK names a folder, each host sees <folder>.<host> there instead
# (a bind mount in a mount namespace of its own): a disk of its own, as on a real node.
set -euo pipefail
host=$1
shift
exec ip netns exec "$host" unshare --uts --mount /bin/sh -c '
  hostname "$0" || exit 1
  if [ -n "${NETNS_CLUSTER_LOCAL_DISK:-}" ]; then
    mkdir -p "$NETNS_CLUSTER_LOCAL_DISK" "$NETNS_CLUSTER_LOCAL_DISK.$0" &&
      mount --bind "$NETNS_CLUSTER_LOCAL_DISK.$0" "$NETNS_CLUSTER_LOCAL_DISK" || exit 1
  fi
  exec /bin/sh -c "$1"' "$host" "$*"
