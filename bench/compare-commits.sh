#!/usr/bin/env bash
# The client's figures at two commits, measured in one run: builds
# redis-lock-profile at OLD and at NEW (a git worktree each, one target dir
# of their own: the two clients' crates differ by path, so both builds keep
# their artifacts, and shared dependencies compile once), then runs every
# configuration old, new, old, new ... ROUNDS times against the same
# module .so, so only the client differs. On a shared,
# loaded machine the absolute numbers drift from minute to minute; runs
# interleaved this way drift together, and new/old stays fair.
#
# usage: bench/compare-commits.sh OLD NEW [ROUNDS] [SECS]
#   e.g. bench/compare-commits.sh bcce6c2 b1da5b4 3 2   (redis-rs 0.27 -> 1.8)
# env:   REDIS_LOCK_MODULE  the module (default target/release/libredis_lock.so)
#        COMPARE_DIR        worktrees, target dirs, logs (default /tmp/redis-lock-compare)
#        CONFIGS            "MODE N TASKS" items separated by '|'
# The two worktrees stay for the next run (the build is then incremental):
# `git worktree remove $COMPARE_DIR/old` (and new) when done.
set -euo pipefail

OLD=${1:?usage: $0 OLD NEW [ROUNDS] [SECS]}
NEW=${2:?usage: $0 OLD NEW [ROUNDS] [SECS]}
ROUNDS=${3:-3}
SECS=${4:-2}
MODULE=${REDIS_LOCK_MODULE:-$PWD/target/release/libredis_lock.so}
WORK=${COMPARE_DIR:-/tmp/redis-lock-compare}
CONFIGS=${CONFIGS:-"ours 1 1|ours 3 1|ours 3 64|ours-wait 3 64"}
[ -f "$MODULE" ] || { echo "no module at $MODULE (cargo build --release first)" >&2; exit 1; }
mkdir -p "$WORK"

for side in old new; do
    commit=$OLD; [ $side = new ] && commit=$NEW
    tree=$WORK/$side
    # A worktree left by an earlier run at another commit is moved to this one.
    if [ -d "$tree" ]; then
        git -C "$tree" checkout --quiet --detach "$commit"
    else
        git worktree add --quiet --detach "$tree" "$commit"
    fi
    CARGO_TARGET_DIR=$WORK/target cargo build --quiet --release \
        --manifest-path "$tree/bench/Cargo.toml" --bin redis-lock-profile
    cp "$WORK/target/release/redis-lock-profile" "$WORK/$side-profile"
done

log=$WORK/runs.log
: > "$log"
IFS='|' read -ra configs <<< "$CONFIGS"
for round in $(seq "$ROUNDS"); do
    for config in "${configs[@]}"; do
        # Which side goes first alternates by round: neither always runs
        # right after the other's servers stopped.
        sides="old new"; [ $((round % 2)) = 0 ] && sides="new old"
        for side in $sides; do
            # shellcheck disable=SC2086
            line=$(REDIS_LOCK_MODULE=$MODULE "$WORK/$side-profile" $config "$SECS")
            echo "$side $round | $line" | tee -a "$log"
        done
    done
done

# Per configuration and side: median and range of cycles/s and of client
# CPU per cycle, then new/old of the medians.
python3 - "$log" "$OLD" "$NEW" <<'EOF'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"(old|new) \d+ \| (\S+ N=\d+ tasks=\d+): (\d+) cycles/s, client CPU ([\d.]+)", line)
    if m:
        side, config, rate, cpu = m.group(1), m.group(2), float(m.group(3)), float(m.group(4))
        runs.setdefault(config, {}).setdefault(side, []).append((rate, cpu))
print(f"\nold = {sys.argv[2]}, new = {sys.argv[3]}; median (min-max) of each side's runs")
print("| configuration | old cycles/s | new cycles/s | new/old | old µs CPU/cycle | new µs CPU/cycle | new/old |")
print("|---|---|---|---|---|---|---|")
for config, sides in runs.items():
    cells = []
    for i, fmt in ((0, "{:.0f}"), (1, "{:.1f}")):
        med = {}
        for side in ("old", "new"):
            xs = [r[i] for r in sides.get(side, [])]
            med[side] = statistics.median(xs)
            cells.append(f"{fmt.format(med[side])} ({fmt.format(min(xs))}-{fmt.format(max(xs))})")
        cells.append(f"{med['new'] / med['old']:.2f}")
    print(f"| {config} (n={len(sides['old'])}+{len(sides['new'])}) | " + " | ".join(cells) + " |")
EOF
