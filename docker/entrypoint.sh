#!/bin/sh
# Entry point of the cluster image: `reshape-node head [daemon args...]` or `reshape-node compute`;
# with the Slurm overlay (docker/slurm-compose.yml) `slurm-head` or `slurm-compute`.
#
# Both roles: host keys for this container, the cluster's ssh key from the shared
# volume /cluster (the first node to start makes it, under a mkdir lock; the
# others wait for it) authorized for root, and sshd; likewise the CURVE keys of
# the daemon and its clients in /cluster/keys ($RESHAPE_KEYS, `reshape keys`).
# The head then runs the scheduler daemon in the foreground with the pool of
# docker/pool.toml (or $RESHAPE_POOL); a compute node runs its node monitor
# (`reshape nodemon`), which registers the node with the daemon and heartbeats.
set -eu
role=${1:-compute}
[ $# -gt 0 ] && shift
keydir=/cluster/ssh
mkdir -p "$keydir"
ssh-keygen -A >/dev/null
if [ ! -s "$keydir/id_ed25519.pub" ] && mkdir "$keydir/.lock" 2>/dev/null; then
    ssh-keygen -q -t ed25519 -N '' -C reshape-cluster -f "$keydir/id_ed25519.tmp"
    mv "$keydir/id_ed25519.tmp.pub" "$keydir/id_ed25519.pub"
    mv "$keydir/id_ed25519.tmp" "$keydir/id_ed25519"
fi
waited=0
while [ ! -s "$keydir/id_ed25519.pub" ]; do
    if [ $waited -ge 120 ]; then
        echo "reshape-node: no cluster key in $keydir after 120 s (remove $keydir/.lock if a node died making it)" >&2
        exit 1
    fi
    sleep 1
    waited=$((waited + 1))
done
install -m 600 "$keydir/id_ed25519.pub" /root/.ssh/authorized_keys

# CURVE keys: the daemon's pair and the client pair used by the CLI, jobs and node monitors.
curve=${RESHAPE_KEYS:-/cluster/keys}
if [ ! -s "$curve/client.key_secret" ] && mkdir -p "$curve" && mkdir "$curve/.lock" 2>/dev/null; then
    reshape keys --dir "$curve" >/dev/null
fi
waited=0
while [ ! -s "$curve/client.key_secret" ] || [ ! -s "$curve/server.key" ]; do
    if [ $waited -ge 120 ]; then
        echo "reshape-node: no CURVE keys in $curve after 120 s (remove $curve/.lock if a node died making them)" >&2
        exit 1
    fi
    sleep 1
    waited=$((waited + 1))
done
export RESHAPE_KEYS="$curve"

# Slurm roles: one munge key for the cluster (made like the ssh key), munged, then
# slurmctld (head) or slurmd (compute) in the foreground, with docker/slurm/slurm.conf.
start_munge() {
    mk=/cluster/slurm
    mkdir -p "$mk"
    if [ ! -s "$mk/munge.key" ] && mkdir "$mk/.lock" 2>/dev/null; then
        head -c 1024 /dev/urandom > "$mk/munge.key.tmp" && mv "$mk/munge.key.tmp" "$mk/munge.key"
    fi
    waited=0
    while [ ! -s "$mk/munge.key" ]; do
        [ $waited -ge 120 ] && { echo "reshape-node: no munge key in $mk after 120 s" >&2; exit 1; }
        sleep 1
        waited=$((waited + 1))
    done
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
        /usr/sbin/sshd -e
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
