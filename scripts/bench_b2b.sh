# The back-to-back section of scripts/bench.sh (sourced by it: uses its helpers, variables
# and raw file; keys start with `bb.`). A script that reads a file twice in a row
# (`md5sum f; cp f dst`) must not pay for a second decode: each array is read three
# times through a fresh mount with the default materialization (`--materialize auto`),
# each read started the moment the last ends, in each --io mode; the daemon's CPU
# seconds (/proc/PID/stat, user + system) show any hidden second decode.
#   bb.MODE.N.ARRAY       seconds of read N (1, 2, 3) of ARRAY through a MODE mount
#   bb.MODE.cpu1.ARRAY    the daemon's CPU seconds for read 1 (from just after mounting)
#   bb.MODE.cpu3.ARRAY    the daemon's CPU seconds for reads 1 to 3
#   bb.idle_cpu.ARRAY     the daemon's CPU seconds for one read then 10 s idle (auto)
#   bb.cat.ARRAY          `zarrfs cat` of ARRAY (cold), seconds; bb.cat_cpu.ARRAY its CPU
#   bb.plain_warm         the warm plain file
# Figures are medians of BENCH_B2B_REPEAT runs (default 3).

clk_tck="$(getconf CLK_TCK)"
b2b_repeat="${BENCH_B2B_REPEAT:-3}"
b2b_idle="${BENCH_B2B_IDLE:-10}"

# daemon_cpu MNT: the CPU seconds the daemon serving MNT has used so far.
daemon_cpu() {
    local pid
    pid="$(daemon_pid "$1")"
    if [ -n "$pid" ] && [ -r "/proc/$pid/stat" ]; then
        # Fields after the command name (which may hold spaces): utime and stime are
        # the 12th and 13th of them.
        sed 's/^.*) //' "/proc/$pid/stat" | awk -v t="$clk_tck" '{ printf "%.3f", ($12 + $13) / t }'
    else
        echo n/a
    fi
}

# cpu_since KEY BEFORE MNT: record KEY the daemon's CPU seconds since BEFORE.
cpu_since() {
    local after
    after="$(daemon_cpu "$3")"
    if [ "$2" = n/a ] || [ "$after" = n/a ]; then
        record "$1" n/a
    else
        record "$1" "$(awk -v a="$2" -v b="$after" 'BEGIN { printf "%.3f", b - a }')"
    fi
}

# cat_timed ARRAY: `zarrfs cat` of ARRAY, recording its seconds and CPU seconds.
cat_timed() {
    local out="$target_dir/bench-cat-times" t0
    t0="$(now)"
    if { TIMEFORMAT='%U %S'; time "$zarrfs" cat "$big" "$1" --order C >/dev/null 2>/dev/null; } 2>"$out"; then
        record "bb.cat.$1" "$(since "$t0")"
        record "bb.cat_cpu.$1" "$(awk 'END { printf "%.3f", $1 + $2 }' "$out")"
    else
        record "bb.cat.$1" error
    fi
    rm -f "$out"
}

mnt="$mnt_root/big"
for r in $(seq "$b2b_repeat"); do
    for v in "${variants[@]}"; do
        for mode in auto direct cache; do
            say "$v: (bb) three back-to-back reads, --io $mode, run $r/$b2b_repeat"
            drop_caches
            if [ "$mode" = auto ]; then
                materialize=auto fresh_mount "$big" "$mnt"
            else
                materialize=auto fresh_mount "$big" "$mnt" --io "$mode"
            fi
            before="$(daemon_cpu "$mnt")"
            timed "bb.$mode.1.$v" dd_read "$mnt/$v"
            cpu_since "bb.$mode.cpu1.$v" "$before" "$mnt"
            timed "bb.$mode.2.$v" dd_read "$mnt/$v"
            timed "bb.$mode.3.$v" dd_read "$mnt/$v"
            cpu_since "bb.$mode.cpu3.$v" "$before" "$mnt"
            unmount "$mnt"
        done
        say "$v: (bb) one read then ${b2b_idle} s idle; zarrfs cat"
        drop_caches
        materialize=auto fresh_mount "$big" "$mnt"
        before="$(daemon_cpu "$mnt")"
        dd_read "$mnt/$v"
        sleep "$b2b_idle"
        cpu_since "bb.idle_cpu.$v" "$before" "$mnt"
        if [ "$r" -eq 1 ]; then
            pyrecord check "$mnt/$v" "$plain" "$shape" C "check.bb.$v"
        fi
        unmount "$mnt"
        drop_caches
        cat_timed "$v"
    done
    dd_read "$plain"
    timed bb.plain_warm dd_read "$plain"
done
