# The zarrs section of scripts/bench.sh (sourced by it: uses its helpers, variables and
# raw file; keys start with `z.`). zarrfs's own codec and metadata layers against zarrs,
# the Rust Zarr library, on the four 1 GiB arrays of big.zarr, each process timed whole
# (wall clock) after the page cache is dropped:
#   z.cat.V           `zarrfs cat` of V, C order, to /dev/null (as (c))
#   z.zarrs.V         benches/zarrs-read: zarrs' filesystem store, the whole array read
#                     into memory as C-order bytes (retrieve_array_subset of the full
#                     subset, zarrs' default codec options and concurrency)
#   z.zarrs_inner.V   the reader's own seconds (opening the array and the read, without
#                     the process's start and exit)
#   z.{cat,zarrs}.V.sha256  once per array, outside the timing: the two must be equal,
#                     else the bench stops
#   z.meta.zarrs      the zarrs version in benches/zarrs-read/Cargo.lock
# `zarrfs cat` streams its output while zarrs-read holds the whole array (1 GiB) in memory
# (its page faults and the release at exit count in z.zarrs). Each repetition runs
# `zarrfs cat` and the reader back to back, so that the VM's drifting speed affects both
# alike. The reader is built once, with its own target dir
# (target/bench-zarrs-read: the test run's target/zarrs-read is built with less
# optimization); cargo leaves it alone when it is up to date.
zarrs_target="$target_dir/bench-zarrs-read"
zarrs_read="$zarrs_target/release/zarrs-read"
say "(z) cargo build --release --manifest-path benches/zarrs-read/Cargo.toml"
CARGO_TARGET_DIR="$zarrs_target" cargo build --release --quiet --locked \
    --manifest-path benches/zarrs-read/Cargo.toml || die "building benches/zarrs-read failed"
[ -x "$zarrs_read" ] || die "no zarrs-read binary at $zarrs_read"
record z.meta.zarrs "$(awk '$0 == "name = \"zarrs\"" { getline; gsub(/[^0-9.]/, ""); print }' \
    benches/zarrs-read/Cargo.lock)"

zarrs_out="$target_dir/bench-zarrs-out"
read_zarrs() { "$zarrs_read" "$big" "$1" >"$zarrs_out"; }
for v in "${variants[@]}"; do
    say "(z) $v: SHA-256 of zarrfs cat and of zarrs-read (not timed)"
    cat_sha="$("$zarrfs" cat "$big" "$v" --order C | sha256sum | cut -d' ' -f1)" \
        || die "(z) zarrfs cat $big $v failed"
    zarrs_sha="$("$zarrs_read" "$big" "$v" --sha256 | cut -d' ' -f3)" \
        || die "(z) zarrs-read $big $v failed"
    record "z.cat.$v.sha256" "$cat_sha"
    record "z.zarrs.$v.sha256" "$zarrs_sha"
    if [[ -z "$cat_sha" || "$cat_sha" != "$zarrs_sha" ]]; then
        die "(z) $v: zarrs read other bytes than zarrfs cat" \
            "(sha256 $zarrs_sha, zarrfs cat $cat_sha)"
    fi
    for r in $(seq "$repeat"); do
        say "(z) $v: zarrfs cat, zarrs-read, cold, run $r/$repeat"
        drop_caches
        timed "z.cat.$v" cat_array "$v" C
        drop_caches
        : >"$zarrs_out"
        timed "z.zarrs.$v" read_zarrs "$v"
        if [ -s "$zarrs_out" ]; then
            record "z.zarrs_inner.$v" "$(cut -d' ' -f1 "$zarrs_out")"
        fi
    done
done
rm -f "$zarrs_out"
