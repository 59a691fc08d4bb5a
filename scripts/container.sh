#!/usr/bin/env bash
# The zarrfs container image (Containerfile), built and run with podman, or docker where
# podman is missing and a Docker engine answers. See docs/clusters.md.
#
# Usage: bash scripts/container.sh COMMAND [ARGS]
#   build            the image from source: zarrfs compiled in the Rust stage, on
#                    debian:bookworm-slim (both images pulled from a registry)
#   build-local      without a registry: the base made by mmdebstrap from Debian's
#                    packages (once, see `base`), the binary compiled on this machine
#                    (target/release/zarrfs, built if missing) and its fusermount3
#   base             only that base image, localhost/zarrfs-base:SUITE; the root file
#                    system is kept in target/container/base-SUITE.tar (or
#                    $ZARRFS_CONTAINER_BASE_DIR)
#   run ARGS...      `ENGINE run` with the options this machine needs, then ARGS
#   argv SUBCOMMAND  that command line (engine, its options, SUBCOMMAND and, for run and
#                    build, their options), one word a line, for other programs to run
#   install          install what is missing (podman, runc, uidmap, mmdebstrap, fuse3)
# build, build-local and base install what they need first (as root, from Debian's
# packages; no service is started).
#
# Environment:
#   ZARRFS_ENGINE         podman or docker (default: podman if installed, else docker if
#                         its engine answers, else podman, installed)
#   ZARRFS_IMAGE          the tag built (default localhost/zarrfs:latest)
#   ZARRFS_BASE           the base image (build: docker.io/library/debian:bookworm-slim;
#                         build-local: localhost/zarrfs-base:SUITE, made if missing)
#   ZARRFS_RUST           the Rust image of `build` (docker.io/library/rust:1-bookworm)
#   ZARRFS_BINARY         the binary of build-local (default target/release/zarrfs); it
#                         must run on the base's glibc
#   ZARRFS_DEBIAN_SUITE   the base's Debian release (default bookworm)
#   ZARRFS_DEBIAN_MIRROR  where mmdebstrap fetches it (default http://deb.debian.org/debian)
#
# Two options are added only where the machine needs them (see docs/clusters.md):
# `--runtime runc` where the cgroups are in hybrid mode (v1 controllers with a v2
# hierarchy beside them), which crun, podman's default runtime, refuses; and
# `--ulimit nofile=N:N --ulimit nproc=M:M` at this machine's hard limits where root has no
# CAP_SYS_RESOURCE, since podman otherwise raises both in the container above them and
# the container cannot start.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

suite="${ZARRFS_DEBIAN_SUITE:-bookworm}"
mirror="${ZARRFS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
image="${ZARRFS_IMAGE:-localhost/zarrfs:latest}"
local_base="localhost/zarrfs-base:$suite"
cache=target/container
# Where the base's root file system is kept: the test cache's entry when scripts/test.sh
# names one, else beside the build context.
base_dir="${ZARRFS_CONTAINER_BASE_DIR:-$cache}"

say() { echo "container.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# The engine: ZARRFS_ENGINE, else podman if installed, else docker if its engine
# answers, else podman (to be installed).
if [ -n "${ZARRFS_ENGINE:-}" ]; then
    case "$ZARRFS_ENGINE" in
        podman|docker) engine=$ZARRFS_ENGINE ;;
        *) die "ZARRFS_ENGINE must be podman or docker, not $ZARRFS_ENGINE" ;;
    esac
elif command -v podman >/dev/null; then
    engine=podman
elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    engine=docker
else
    engine=podman
fi

# Debian's packages `$@`, installed as root without starting any service.
apt_install() {
    [ "$(id -u)" -eq 0 ] || die "need root to install $*"
    say "installing $*"
    apt-get update -qq
    local policy=/usr/sbin/policy-rc.d made_policy=
    if ! [ -e $policy ]; then
        printf '#!/bin/sh\nexit 101\n' > $policy && chmod +x $policy && made_policy=1
    fi
    local rc=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" || rc=$?
    [ -z "$made_policy" ] || rm -f $policy
    return $rc
}

# Whether the base image of build-local is there already.
have_base() {
    command -v "$engine" >/dev/null && engine_run image inspect "$local_base" >/dev/null 2>&1
}

# Installs what is missing for $1: `registry` (the engine: podman with runc, and uidmap
# for rootless use), `local` (build-local: also fuse3 for fusermount3, and mmdebstrap
# unless the base is there or ZARRFS_BASE names another) or `all`.
install_missing() {
    local what=$1 missing=()
    if [ "$engine" = podman ]; then
        command -v podman >/dev/null || missing+=(podman)
        command -v runc >/dev/null || [ -x /usr/sbin/runc ] || missing+=(runc)
        command -v newuidmap >/dev/null || missing+=(uidmap)
    elif ! docker info >/dev/null 2>&1; then
        die "docker's engine does not answer (docker info)"
    fi
    if [ "$what" != registry ]; then
        [ -x /usr/bin/fusermount3 ] || missing+=(fuse3)
        if ! command -v mmdebstrap >/dev/null &&
            { [ "$what" = all ] || { [ -z "${ZARRFS_BASE:-}" ] && ! have_base; }; }; then
            missing+=(mmdebstrap)
        fi
    fi
    [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
}

# Whether the cgroups are in hybrid mode: v1 controllers under /sys/fs/cgroup and a v2
# hierarchy at /sys/fs/cgroup/unified.
hybrid_cgroups() {
    [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" != cgroup2fs ] &&
        [ "$(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]
}

# Whether this process is root without CAP_SYS_RESOURCE (bit 24 of its effective set).
root_without_sys_resource() {
    [ "$(id -u)" -eq 0 ] || return 1
    local caps
    caps=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
    [ $(( (16#$caps >> 24) & 1 )) -eq 0 ]
}

# The hard limit `ulimit -H$1`, at most $2.
hard_limit() {
    local value
    value=$(ulimit -H"$1")
    if [ "$value" = unlimited ] || [ "$value" -gt "$2" ]; then
        value=$2
    fi
    echo "$value"
}

# The command line of `ENGINE SUBCOMMAND` with this machine's options, one word a line.
argv() {
    local sub=$1
    echo "$engine"
    if [ "$engine" = podman ] && hybrid_cgroups; then
        printf '%s\n' --runtime runc
    fi
    echo "$sub"
    if [ "$engine" = podman ] && { [ "$sub" = run ] || [ "$sub" = build ] || [ "$sub" = create ]; } &&
        root_without_sys_resource; then
        printf '%s\n' --ulimit "nofile=$(hard_limit n 1048576):$(hard_limit n 1048576)" \
            --ulimit "nproc=$(hard_limit u 4096):$(hard_limit u 4096)"
    fi
}

# `ENGINE SUBCOMMAND ARGS...` with this machine's options.
engine_run() {
    local cmd
    mapfile -t cmd < <(argv "$1")
    shift
    "${cmd[@]}" "$@"
}

# The base image of build-local, made once: mmdebstrap's minbase of the suite (without
# documentation, manual pages and translations, as the slim images), imported.
make_base() {
    if engine_run image inspect "$local_base" >/dev/null 2>&1; then
        return
    fi
    local tar="$base_dir/base-$suite.tar"
    if ! [ -f "$tar" ]; then
        say "making the base from Debian's $suite packages with mmdebstrap into $tar"
        mkdir -p "$base_dir"
        local sources=("deb $mirror $suite main" "deb $mirror $suite-updates main")
        if [[ $mirror == */debian ]]; then
            sources+=("deb ${mirror%/debian}/debian-security $suite-security main")
        fi
        mmdebstrap --variant=minbase --format=tar --quiet \
            --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/info/*' \
            --dpkgopt='path-exclude=/usr/share/doc/*' \
            --dpkgopt='path-include=/usr/share/doc/*/copyright' \
            --dpkgopt='path-exclude=/usr/share/locale/*' \
            --dpkgopt='path-include=/usr/share/locale/locale.alias' \
            "$suite" "$tar.part.$$" "${sources[@]}"
        mv "$tar.part.$$" "$tar"
    fi
    say "importing $tar as $local_base"
    engine_run import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' "$tar" "$local_base" >/dev/null
}

# build-local's context: the binary (without its debug information) and fusermount3.
stage_prebuilt() {
    local binary="${ZARRFS_BINARY:-target/release/zarrfs}" context="$cache/prebuilt"
    if [ -z "${ZARRFS_BINARY:-}" ] && ! [ -x "$binary" ]; then
        say "building $binary"
        cargo build --release --bin zarrfs >&2
    fi
    [ -x "$binary" ] || die "no zarrfs binary at $binary"
    mkdir -p "$context"
    if command -v objcopy >/dev/null; then
        objcopy --strip-debug "$binary" "$context/zarrfs.part"
    else
        cp "$binary" "$context/zarrfs.part"
    fi
    mv "$context/zarrfs.part" "$context/zarrfs"
    cp /usr/bin/fusermount3 "$context/fusermount3"
    echo "$context"
}

# `ENGINE build ARGS...`, then the image it replaces under the tag removed (unless a
# container still uses it) and the untagged images of the build and prebuilt stages
# (labelled org.zarrfs.stage), so that builds leave nothing behind.
build_image() {
    local old new
    old=$(engine_run image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
    engine_run build "$@"
    new=$(engine_run image inspect --format '{{.Id}}' "$image")
    if [ -n "$old" ] && [ "$old" != "$new" ]; then
        engine_run rmi "$old" >/dev/null 2>&1 || true
    fi
    engine_run image prune --force --filter label=org.zarrfs.stage >/dev/null
}

command=${1:-}
[ $# -eq 0 ] || shift
case "$command" in
    build)
        install_missing registry
        # BINARY spelled out: podman before 4.4 (buildah 1.28) does not follow an ARG's
        # default in FROM to the stage it names, skips that stage, then looks for an
        # image called `build`.
        build_image \
            --build-arg "BASE=${ZARRFS_BASE:-docker.io/library/debian:bookworm-slim}" \
            --build-arg "RUST=${ZARRFS_RUST:-docker.io/library/rust:1-bookworm}" \
            --build-arg BINARY=build -t "$image" -f Containerfile "$@" .
        ;;
    build-local)
        install_missing local
        if [ -z "${ZARRFS_BASE:-}" ]; then
            make_base
        fi
        context=$(stage_prebuilt)
        # Nothing to fetch: the build has no network.
        build_image --network none \
            --build-arg "BASE=${ZARRFS_BASE:-$local_base}" --build-arg BINARY=prebuilt \
            -t "$image" -f Containerfile "$@" "$context"
        ;;
    base)
        install_missing local
        make_base
        ;;
    run)
        exec_cmd=()
        mapfile -t exec_cmd < <(argv run)
        exec "${exec_cmd[@]}" "$@"
        ;;
    argv)
        [ $# -eq 1 ] || die "usage: container.sh argv SUBCOMMAND"
        argv "$1"
        ;;
    install)
        install_missing all
        ;;
    *)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
