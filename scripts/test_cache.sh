# The test run's machine-wide cache (sourced by scripts/test.sh and the scripts it calls).
#
# What the tests need and a clone does not hold (Python venvs, fixtures, test servers,
# cargo-afl, zarrs' reader, the container base, the cargo build) is kept under one folder,
# $ZARRFS_TEST_CACHE (default /var/cache/zarrfs-test), shared by every clone on the
# machine and keyed by what makes each entry: the usual CI practice of a cache keyed by
# the lock file and the scripts that fill it (a cargo cache keyed by Cargo.lock), kept on
# the machine instead of uploaded. A clone's target/NAME is a symbolic link to its entry.
#
# An entry KIND/KEY is built by one process at a time (a lock file beside it) into a
# folder of its own, KIND/KEY.PID, and becomes KEY by renaming a symbolic link onto
# KIND/KEY: a killed run leaves no half entry (its folder is removed by the next run, its
# process being gone), and a run beside it waits for the entry instead of building it
# twice. The folder keeps its first name because some entries hold their own absolute
# paths (venv scripts, reference sets and Icechunk repositories that name files beside
# them). A changed key builds a new entry; entries of a kind not used for a week are
# pruned, the one in use never.
#
# The cargo build is kept differently: a clone builds in its own target/ (so that two
# runs side by side never replace each other's binaries), restored from the cache before
# the build and saved after it (cache_restore_target / cache_save_target). Cargo decides
# freshness by modification times, and a fresh clone's files are all new: a restore sets
# every tracked file whose content is the one the saved build saw to an old time, so that
# cargo rebuilds what changed and nothing else.

cache_root="${ZARRFS_TEST_CACHE:-/var/cache/zarrfs-test}"
cache_old_time=946684800 # 2000-01-01: older than any build

# cache_key WORDS...: a short hash of the words and of the contents of the files among
# them (a file's content counts, its name too).
cache_key() {
    local w
    for w in "$@"; do
        printf '%s\n' "$w"
        if [ -f "$w" ]; then sha256sum <"$w"; fi
    done | sha256sum | cut -c1-16
}

# cache_entry KIND KEY BUILD: the path of entry KIND/KEY, built first when missing by
# running BUILD (a command and its words) with the entry's new folder as its last word.
# Prints the path on stdout; BUILD's output goes to stderr.
cache_entry() {
    local kind=$1 key=$2
    shift 2
    local dir="$cache_root/$kind"
    mkdir -p "$dir"
    local entry="$dir/$key"
    (
        exec 8>"$entry.lock"
        flock 8
        if ! [ -L "$entry" ]; then
            cache_prune "$kind"
            local build="$entry.$$"
            rm -rf "$build"
            mkdir -p "$build"
            local began=$SECONDS
            echo "test cache: building $kind/$key" >&2
            "$@" "$build" >&2 || { echo "test cache: building $kind/$key failed" >&2; exit 1; }
            ln -sfn "$key.$$" "$entry.link.$$"
            mv -T "$entry.link.$$" "$entry"
            echo "test cache: built $kind/$key in $((SECONDS - began)) s" >&2
        fi
        touch -h "$entry"
    ) || return 1
    printf '%s\n' "$entry"
}

# cache_link KIND KEY LINK BUILD...: cache_entry, then LINK (under target/) points at it.
cache_link() {
    local kind=$1 key=$2 link=$3
    shift 3
    local entry
    entry=$(cache_entry "$kind" "$key" "$@") || return 1
    cache_point "$link" "$entry"
}

# cache_point LINK PATH: LINK (under target/) becomes a symbolic link to PATH in the
# cache, whatever an earlier run left at LINK.
cache_point() {
    mkdir -p "$(dirname "$1")"
    if [ -e "$1" ] && ! [ -L "$1" ]; then rm -rf "$1"; fi
    ln -sfn "$2" "$1"
}

# cache_prune KIND: removes the entries of KIND not used for a week (a link's time is its
# last use), the folders no link names whose builder is gone, and stale lock files.
cache_prune() {
    local dir="$cache_root/$1" path name pid
    [ -d "$dir" ] || return 0
    for path in "$dir"/*; do
        name=${path##*/}
        if [ -L "$path" ]; then
            case $name in
                *.link.*) pid=${name##*.link.}; kill -0 "$pid" 2>/dev/null || rm -f "$path" ;;
                *) if [ -n "$(find "$path" -maxdepth 0 -mtime +7 2>/dev/null)" ]; then
                       rm -f "$path"
                   fi ;;
            esac
        elif [ -d "$path" ]; then
            # KEY.PID: kept while a link names it or its builder runs.
            pid=${name##*.}
            [ "$(readlink "$dir/${name%.*}" 2>/dev/null)" = "$name" ] && continue
            kill -0 "$pid" 2>/dev/null && continue
            rm -rf "$path"
        fi
    done
}

# The tracked files of the clone with their content hashes, one "HASH PATH" a line.
cache_tree_hashes() {
    git ls-files -z | xargs -0 git hash-object -- | paste -d' ' - <(git ls-files)
}

# cache_target_key: the cargo build's key: the toolchain (a build made by another rustc
# is of no use). Cargo itself tracks Cargo.lock, features and flags within a build.
cache_target_key() {
    cache_key "$(rustc -vV)" "$(uname -m)"
}

# cache_copy_build FROM TO [PART...]: copies a cargo build, or the PARTs of it (names in
# FROM; all of it by default). The files that rustc only ever replaces whole, by writing
# a new file and renaming it onto the old name (libraries' .rlib and .rmeta, incremental
# sessions), become hard links to FROM's: a clone's build and the saved one share them,
# and a rebuild in either never changes the other's. The rest (fingerprints, which cargo
# rewrites in place, build scripts' outputs, binaries) is copied. Across file systems,
# everything is copied.
cache_build_linked=(\( -name '*.rlib' -o -name '*.rmeta' -o -path '*/incremental/*' ! -name '*.lock' \))
cache_copy_build() {
    local from=$1 to=$2
    shift 2
    local parts=("$@")
    [ ${#parts[@]} -gt 0 ] || parts=(.)
    mkdir -p "$to" && to=$(cd "$to" && pwd) || return 1
    (cd "$from" && find "${parts[@]}" \( -type d -o ! "${cache_build_linked[@]}" \) -print0 |
        tar --null --no-recursion -T - -cf -) | tar -C "$to" -xpf - || return 1
    local list
    list=$(mktemp)
    (cd "$from" && find "${parts[@]}" -type f "${cache_build_linked[@]}" -print0 >"$list" &&
        { xargs -0 -r cp -al --parents -t "$to" <"$list" 2>/dev/null ||
            xargs -0 -r cp -a --parents -t "$to" <"$list"; })
    local rc=$?
    rm -f "$list"
    return $rc
}

# The bytes (KiB) that cache_copy_build FROM would write: what it copies, not what it links.
cache_build_copied_kib() {
    (cd "$1" && find . -type f ! "${cache_build_linked[@]}" -printf '%s\n') |
        awk '{s += $1} END {printf "%d\n", s / 1024}'
}

# cache_restore_target: copies the saved cargo build into target/ when target/ has none
# (a fresh clone), then dates the tracked files whose content the saved build saw back
# to 2000. Either way, the fingerprints' access times are set to 2000 too: those that
# cargo reads in this run's builds are the units it still uses (cache_sweep_build).
cache_restore_target() {
    local saved="$cache_root/cargo/$(cache_target_key)"
    # The sources as the build about to start sees them: what cache_save_target records
    # (a file edited during the build then counts as changed, as it should).
    mkdir -p target
    cache_tree_hashes >target/.tree-hashes
    if ! [ -L "$saved" ]; then
        echo "test cache: no saved cargo build: building from scratch" >&2
    elif [ -d target/release ]; then
        # A target/ of the clone's own is left to cargo as it is: its builds may have
        # seen other contents than the saved one.
        :
    else
        local began=$SECONDS need free
        need=$(cache_build_copied_kib "$saved/")
        free=$(df -Pk target | awk 'NR == 2 {print $4}')
        # The restored build grows as it compiles: room for that, and for the tests' files.
        if [ "$free" -lt $((need + 4 * 1024 * 1024)) ]; then
            echo "test cache: $((free / 1024 / 1024)) GiB free on the disk of target/: restoring the saved cargo build needs $((need / 1024 / 1024)) GiB and 4 GiB to build and test in" >&2
            return 1
        fi
        if ! cache_copy_build "$saved" target; then
            echo "test cache: restoring the saved cargo build ($saved) failed" >&2
            return 1
        fi
        rm -f target/.saved-tree-hashes
        echo "test cache: restored the cargo build in $((SECONDS - began)) s ($((need / 1024 / 1024)) GiB copied, the libraries linked)" >&2
        touch target/.restored
        local same
        same=$(sort target/.tree-hashes | comm -12 - <(sort "$saved/.saved-tree-hashes") | cut -d' ' -f2-)
        [ -z "$same" ] || printf '%s\n' "$same" | tr '\n' '\0' | xargs -0 touch -h -d "@$cache_old_time"
        echo "test cache: $(printf '%s' "$same" | grep -c .) of $(git ls-files | wc -l) tracked files as the saved build saw them" >&2
        touch -h "$saved"
    fi
    local fp
    for fp in target/release/.fingerprint target/fuzz/release/.fingerprint; do
        [ -d "$fp" ] && find "$fp" -mindepth 2 -type f -exec touch -a -d "@$cache_old_time" {} +
    done
    return 0
}

# cache_sweep_build: removes from target/release and target/fuzz/release the units (a
# library, a binary, a build script's run) that no cargo command of this run used: those
# whose fingerprint cargo did not read since cache_restore_target dated its access time
# back. Without this, the saved build would keep every unit that any earlier commit
# needed. Incremental folders of crates not compiled for a week go too (rustc itself
# prunes the sessions within one).
cache_sweep_build() {
    local dir unit hash n=0
    for dir in target/release target/fuzz/release; do
        [ -d "$dir/.fingerprint" ] || continue
        local live
        live=$(find "$dir/.fingerprint" -mindepth 2 -type f -newerat "@$((cache_old_time + 86400))" -printf '%h\n' | sort -u)
        if [ -z "$live" ]; then
            # Access times not kept (a noatime mount): nothing is known, nothing goes.
            echo "test cache: no fingerprint read in $dir (access times not kept?): nothing swept" >&2
            continue
        fi
        for unit in "$dir"/.fingerprint/*; do
            grep -qxF "$unit" <<<"$live" && continue
            hash=${unit##*-}
            [[ $hash =~ ^[0-9a-f]{16}$ ]] || continue
            rm -rf "$unit" "$dir/build/${unit##*/}" "$dir"/deps/*-"$hash" "$dir"/deps/*-"$hash".* \
                "$dir"/examples/*-"$hash" "$dir"/examples/*-"$hash".*
            n=$((n + 1))
        done
        [ -d "$dir/incremental" ] && find "$dir/incremental" -mindepth 1 -maxdepth 1 -type d -mtime +7 -exec rm -rf {} +
    done
    echo "test cache: swept $n units no build of this run used" >&2
}

# cache_save_target: after a successful build, saves target/'s cargo build (release,
# fuzz) with the tree hashes it was built from (taken by cache_restore_target before the
# build began), replacing the saved one; the units this run did not use are swept first.
cache_save_target() {
    # Nothing compiled since the restore (no output of rustc or of a build script is
    # newer; cargo rewrites its lock and the top-level .d files on every command): the
    # saved build is this one already.
    local outputs=(target/release/deps target/release/build target/fuzz/release/deps target/fuzz/release/build)
    if [ -e target/.restored ] && [ -z "$(find "${outputs[@]}" -newer target/.restored -type f -print -quit 2>/dev/null)" ]; then
        echo "test cache: the saved cargo build is up to date" >&2
        return 0
    fi
    cache_sweep_build
    local key began=$SECONDS
    key=$(cache_target_key)
    local dir="$cache_root/cargo"
    mkdir -p "$dir"
    (
        exec 8>"$dir/$key.lock"
        flock 8
        local build="$dir/$key.$$" old
        old=$(readlink "$dir/$key" 2>/dev/null || true)
        rm -rf "$build"
        mkdir -p "$build"
        local parts=() part
        for part in release fuzz .rustc_info.json CACHEDIR.TAG; do
            [ -e "target/$part" ] && parts+=("$part")
        done
        cache_copy_build target "$build" "${parts[@]}" || { rm -rf "$build"; exit 1; }
        cp target/.tree-hashes "$build/.saved-tree-hashes"
        ln -sfn "$key.$$" "$dir/$key.link.$$"
        mv -T "$dir/$key.link.$$" "$dir/$key"
        [ -z "$old" ] || [ "$old" = "$key.$$" ] || rm -rf "${dir:?}/$old"
    ) || { echo "test cache: saving the cargo build failed" >&2; return 1; }
    echo "test cache: saved the cargo build in $((SECONDS - began)) s ($(du -sh "$dir/$key/" | cut -f1), the libraries shared with target/)" >&2
}
