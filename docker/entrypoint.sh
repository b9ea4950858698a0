#!/bin/sh
# Entry point of the cluster image: `reshape-node head [daemon args...]` or `reshape-node compute`;
# with the Slurm overlay (docker/slurm-compose.yml) `slurm-head` or `slurm-compute`.
#
# Both roles: an ed25519 host key for this container, the cluster's ssh key from the shared
# volume /cluster (the first node to start makes it, under a mkdir lock; the
# others wait for it) authorized for root, and sshd; likewise the CURVE keys of
# the daemon and its clients in /cluster/keys ($RESHAPE_KEYS, `reshape keys`; accounts.toml maps the
# admin key `client` to root, and each compute node adds its own node-HOST key).
# The head then runs the scheduler daemon in the foreground with the pool of
# docker/pool.toml (or $RESHAPE_POOL); a compute node runs its node monitor
# (`reshape nodemon`), which registers the node with the daemon and heartbeats.
set -eu
role=${1:-compute}
[ $# -gt 0 ] && shift

# wait_for WHAT FILE...: until every FILE is non-empty, looking every 0.1 s, at most 120 s
wait_for() {
    what=$1
    shift
    n=0
    for f in "$@"; do
        while [ ! -s "$f" ]; do
            if [ $n -ge 1200 ]; then
                echo "reshape-node: no $what ($f) after 120 s (remove $(dirname "$f")/.lock if a node died making it)" >&2
                exit 1
            fi
            sleep 0.1
            n=$((n + 1))
        done
    done
}

# This container's host key: ed25519 only (RSA and ECDSA keys, which `ssh-keygen -A` makes too, cost
# a second of CPU each per container: seconds of start-up when the whole cluster starts at once).
[ -s /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key

# The cluster's keys, each made once in the shared volume by the first node to take its lock (all
# of them first, so that different nodes make different keys at the same time), then waited for:
# the ssh key, the CURVE keys of the daemon and its clients ($RESHAPE_KEYS, `reshape keys`), and
# for the Slurm roles munge's key.
keydir=/cluster/ssh
curve=${RESHAPE_KEYS:-/cluster/keys}
mk=/cluster/slurm
mkdir -p "$keydir" "$curve" "$mk"
if [ ! -s "$keydir/id_ed25519.pub" ] && mkdir "$keydir/.lock" 2>/dev/null; then
    ssh-keygen -q -t ed25519 -N '' -C reshape-cluster -f "$keydir/id_ed25519.tmp"
    mv "$keydir/id_ed25519.tmp" "$keydir/id_ed25519"
    mv "$keydir/id_ed25519.tmp.pub" "$keydir/id_ed25519.pub"
fi
case "$role" in slurm-*)
    if [ ! -s "$mk/munge.key" ] && mkdir "$mk/.lock" 2>/dev/null; then
        head -c 1024 /dev/urandom > "$mk/munge.key.tmp" && mv "$mk/munge.key.tmp" "$mk/munge.key"
    fi
esac
if [ ! -s "$curve/client.key_secret" ] && mkdir "$curve/.lock" 2>/dev/null; then
    reshape keys --dir "$curve" >/dev/null
fi
wait_for "cluster ssh key" "$keydir/id_ed25519" "$keydir/id_ed25519.pub"
install -m 600 "$keydir/id_ed25519.pub" /root/.ssh/authorized_keys
wait_for "CURVE keys" "$curve/server.key" "$curve/client.key_secret"
export RESHAPE_KEYS="$curve"

# Slurm roles: munged with the cluster's key, then slurmctld (head) or slurmd (compute) in the
# foreground, with docker/slurm/slurm.conf.
start_munge() {
    wait_for "munge key" "$mk/munge.key"
    install -o munge -g munge -m 400 "$mk/munge.key" /etc/munge/munge.key
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged
    install -m 644 /opt/reshape/docker/slurm/slurm.conf /etc/slurm/slurm.conf
}

case "$role" in
    slurm-head)
        /usr/sbin/sshd -e
        start_munge
        exec slurmctld -D -i
        ;;
    slurm-compute)
        /usr/sbin/sshd -e
        start_munge
        exec slurmd -D
        ;;
    compute)
        # this node's own key (node-HOST: it speaks for this node only; the monitor picks it up), made
        # before sshd starts, so before the head (which waits for sshd) reads the authorized keys
        [ -s "$curve/node-$(hostname).key_secret" ] || reshape keys --dir "$curve" --client "node-$(hostname)" >/dev/null
        /usr/sbin/sshd -e
        # the jobs whose first node this is run their mpiexec here (reshape daemon --mpiexec-on first-node):
        # Hydra tells their proxies to call back to this node's address on the cluster network
        export HYDRA_IFACE=${HYDRA_IFACE:-eth0}
        # the monitor retries until the head's daemon answers; if it ends, the container restarts
        exec reshape nodemon --daemon "${RESHAPE_DAEMON:-tcp://head:5555}" --node "$(hostname)" "$@"
        ;;
    head)
        /usr/sbin/sshd -e
        mkdir -p "$RESHAPE_STATE_DIR"
        # Hydra tells its proxies to call back to this address (the cluster network's interface).
        export HYDRA_IFACE=${HYDRA_IFACE:-eth0}
        exec reshape daemon --endpoint "${RESHAPE_ENDPOINT:-tcp://0.0.0.0:5555}" \
            --config "${RESHAPE_POOL:-/opt/reshape/docker/pool.toml}" \
            --state-dir "$RESHAPE_STATE_DIR" --workdir /opt/reshape "$@"
        ;;
    *)
        echo "reshape-node: unknown role '$role' (use head, compute, slurm-head or slurm-compute)" >&2
        exit 2
        ;;
esac
