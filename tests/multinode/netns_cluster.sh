#!/usr/bin/env bash
# Makes a small "cluster" of hosts on this machine for multi-node tests: each host is a
# network namespace with its own address (10.77.77.<10+i>) on a bridge that lives in a
# switch namespace, so nothing changes in the machine's own network. Source it, then:
#   netns_cluster_up <name> <hosts>   # hosts named <name>-h0, <name>-h1, ...
#   netns_cluster_down                # also run from the caller's EXIT trap
# Writes $NETNS_CLUSTER_DIR/hostfile (one "<host> slots=8" line per host) and
# $NETNS_CLUSTER_DIR/hosts (host -> address) for the launch agent, netns_agent.sh.

netns_cluster_supported() {
  # Prints why multi-host tests cannot run here, and fails, when namespaces cannot be made.
  if [[ $(id -u) -ne 0 ]]; then echo "network namespaces need root"; return 1; fi
  for tool in ip unshare mpirun; do
    if ! command -v "$tool" >/dev/null; then echo "$tool is not installed (apt-get install iproute2 util-linux openmpi-bin)"; return 1; fi
  done
  local probe="adm-probe-$$"
  if ! ip netns add "$probe" 2>/dev/null; then echo "'ip netns add' is not permitted in this environment"; return 1; fi
  if ! ip netns exec "$probe" unshare --uts --mount /bin/sh -c 'hostname probe && mount --bind /tmp /mnt' 2>/dev/null; then
    ip netns del "$probe"
    echo "UTS or mount namespaces cannot be made in this environment"
    return 1
  fi
  ip netns del "$probe"
}

netns_cluster_up() {
  local name=$1 hosts=$2
  NETNS_CLUSTER_NAME=$name
  NETNS_CLUSTER_HOSTS=$hosts
  NETNS_CLUSTER_DIR=$(mktemp -d "/tmp/${name}.XXXXXX")
  # Each cluster's bridge is a network of its own, so clusters made at once may share addresses.
  local net=77
  local switch="${name}-sw"
  ip netns add "$switch"
  ip -n "$switch" link add br0 type bridge
  ip -n "$switch" link set br0 up
  ip -n "$switch" link set lo up
  : >"$NETNS_CLUSTER_DIR/hostfile"
  : >"$NETNS_CLUSTER_DIR/hosts"
  local i host address
  for ((i = 0; i < hosts; ++i)); do
    host="${name}-h${i}"
    address="10.77.${net}.$((10 + i))"
    ip netns add "$host"
    ip link add "${name}-v${i}" netns "$host" type veth peer name "p${i}" netns "$switch"
    ip -n "$host" link set "${name}-v${i}" name eth0
    ip -n "$host" addr add "${address}/24" dev eth0
    ip -n "$host" link set eth0 up
    ip -n "$host" link set lo up
    ip -n "$switch" link set "p${i}" master br0
    ip -n "$switch" link set "p${i}" up
    echo "$host slots=8" >>"$NETNS_CLUSTER_DIR/hostfile"
    echo "$host $address" >>"$NETNS_CLUSTER_DIR/hosts"
  done
  NETNS_CLUSTER_SUBNET="10.77.${net}.0/24"
  export NETNS_CLUSTER_NAME NETNS_CLUSTER_HOSTS NETNS_CLUSTER_DIR NETNS_CLUSTER_SUBNET
}

netns_cluster_down() {
  [[ -n ${NETNS_CLUSTER_NAME:-} ]] || return 0
  local i
  for ((i = 0; i < NETNS_CLUSTER_HOSTS; ++i)); do
    # Processes still inside a host (a launch that timed out) go with it.
    local pids
    pids=$(ip netns pids "${NETNS_CLUSTER_NAME}-h${i}" 2>/dev/null || true)
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
    ip netns del "${NETNS_CLUSTER_NAME}-h${i}" 2>/dev/null || true
  done
  ip netns del "${NETNS_CLUSTER_NAME}-sw" 2>/dev/null || true
  rm -rf "$NETNS_CLUSTER_DIR"
  NETNS_CLUSTER_NAME=
}

# Runs a command on host <i> of the cluster, in its namespace and with its hostname.
netns_cluster_exec() {
  local i=$1
  shift
  "$(dirname "${BASH_SOURCE[0]}")/netns_agent.sh" "${NETNS_CLUSTER_NAME}-h${i}" "$@"
}

# mpirun's options for the cluster: the launch agent, TCP between hosts, the hostfile.
netns_cluster_mpirun_options() {
  local agent
  agent="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/netns_agent.sh"
  echo "--hostfile $NETNS_CLUSTER_DIR/hostfile --mca plm_rsh_agent $agent --mca plm_rsh_no_tree_spawn 1" \
    "--mca btl tcp,self --mca btl_tcp_if_include $NETNS_CLUSTER_SUBNET --mca oob_tcp_if_include $NETNS_CLUSTER_SUBNET"
}
