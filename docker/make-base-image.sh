#!/bin/sh
# Build a base image for docker/Dockerfile from Debian's own packages, for
# machines that cannot pull python:3.11-slim-bookworm from a registry.
#
#   sudo docker/make-base-image.sh [IMAGE]        # default IMAGE: reshape-base:bookworm
#   RESHAPE_BASE_IMAGE=reshape-base:bookworm docker-compose build
#
# debootstrap (minbase) makes a Debian bookworm root with python3 (3.11),
# venv, pip and the CA certificates; `python` points at python3 as in the
# official image. The host's CA bundle and pip configuration are copied in, so
# that the image reaches the same package registries as the host (a site CA
# that intercepts TLS, a local index). The tree is imported with
# `docker import`; no registry is contacted.
#
# Environment: MIRROR (default: the host's first deb.debian.org-style URI, or
# http://deb.debian.org/debian), SUITE (bookworm), WORKDIR (a temporary folder).
# Needs root, debootstrap and a running Docker engine. Exit 0 also when the
# image exists already (FORCE=1 rebuilds).
set -eu
image=${1:-reshape-base:bookworm}
suite=${SUITE:-bookworm}

if [ "$(id -u)" != 0 ]; then
    echo "make-base-image: debootstrap needs root" >&2
    exit 2
fi
for tool in debootstrap docker; do
    command -v "$tool" >/dev/null || { echo "make-base-image: $tool not found (apt-get install $tool)" >&2; exit 2; }
done
if [ -z "${FORCE:-}" ] && docker image inspect "$image" >/dev/null 2>&1; then
    echo "make-base-image: $image exists (FORCE=1 rebuilds it)"
    exit 0
fi
if [ -z "${MIRROR:-}" ]; then
    MIRROR=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)$/\1/p; s/^deb \(http[^ ]*\/debian\) .*/\1/p' \
        /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -1)
    MIRROR=${MIRROR:-http://deb.debian.org/debian}
fi

work=${WORKDIR:-$(mktemp -d /var/tmp/reshape-base.XXXXXX)}
root="$work/rootfs"
trap 'rm -rf "$work"' EXIT
echo "make-base-image: debootstrap $suite from $MIRROR into $root"
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
    "$suite" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
    tail -20 "$work/debootstrap.log" >&2
    echo "make-base-image: debootstrap failed (log above)" >&2
    exit 1
}
ln -sf python3 "$root/usr/bin/python"
# the host's trust store and pip settings: the same registries, reached the same way
if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
# Debian marks its Python as externally managed; the image installs into a venv anyway
rm -f "$root"/usr/lib/python3*/EXTERNALLY-MANAGED
# apt caches and logs are not part of an image
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
echo "make-base-image: importing as $image"
tar -C "$root" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
    -c 'CMD ["python3"]' - "$image" >/dev/null
docker run --rm "$image" python --version
