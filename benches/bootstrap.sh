#!/usr/bin/env bash
# Unthrottled bootstrap of real processes on loopback (not run in CI): three
# nodes (127.107.0.1 to .3, racks rack1 to rack3) with a keyspace at
# SimpleStrategy:3 hold KEYS distinct keys `key0`.. of 1 KiB values, loaded
# at ALL through `ringstore batch`; then a fourth node joins, every node
# with its stream throttle at 0. Prints:
#   - space amplification: each node's `Load` (its live bytes) and its disk
#     size, divided by the bytes of keys and values written (every node
#     holds every key at RF 3 of 3);
#   - the join: MiB the joiner applied (its received stream bytes), seconds
#     from its start to 4 nodes `UN`, MiB/s end to end, the streaming phase
#     alone (from the joiner's "took tokens" log line to its "streamed every
#     gained range", so without the ring delay and gossip), and the CPU seconds
#     of the joiner and of the three sources over that time
#     (/proc/PID/stat, steadier than wall time on a shared machine);
#   - the joiner's `Load` over its share of the bytes written (3/4 of it);
#   - the bytes the joiner wrote to its disk (/proc/PID/io write_bytes) over
#     the bytes it applied: the storage engine's write amplification;
#   - how long after UN the joiner's runs of streamed cells were folded into
#     sled (a node keeps what it receives as runs, see storage's `runs`),
#     and its CPU and disk writes by then.
# Usage: benches/bootstrap.sh [KEYS]   (default 1000000: 977 MiB of values,
# 842 MiB joined). About 1.3 s of every join comes before any byte moves (1 s
# of quiet membership before choosing tokens, then ring_delay, 0.3 s here):
# at 300000 keys (253 MiB joined) that is over half of the join, and the
# figure measures those waits more than the data movement.
# STRESS_BIN=path runs another build instead of building this tree's;
# BENCH_LOGS=dir keeps the servers' logs there; BENCH_JOINER_PID_FILE=path
# writes the joiner's pid there as it starts (to attach `perf record -p`).
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-1000000}
. benches/common.sh
block=107
host="127.$block.0.1:7100"
tck=$(getconf CLK_TCK)

start_node() { # i (1-based) [log filter]
  local i=$1
  RINGSTORE_STREAM_THROUGHPUT_MIB_PER_SEC=0 RINGSTORE_RING_DELAY_MS=300 RUST_LOG=${BENCH_RUST_LOG:-${2:-warn}} \
    "$bin" server --cluster-name bootstrap --data-dir "$work/$i" \
    --listen-address "127.$block.0.$i:7100" --internode-address "127.$block.0.$i:7101" \
    --gossip-address "127.$block.0.$i:7000" --seeds "127.$block.0.1:7000" --rack "rack$(( (i - 1) % 3 + 1 ))" \
    2>>"$work/$i.log" &
  pids[$i]=$!
}

un_count() { "$bin" --host "$host" status 2>/dev/null | grep -c '^UN ' || true; }

wait_un() { # count deadline_s
  local deadline=$(( $(date +%s) + $2 ))
  while [ "$(un_count)" != "$1" ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "not $1 nodes UN after $2 s" >&2; "$bin" --host "$host" status >&2 || true
      tail -n 5 "$work"/*.log >&2; keep_logs; exit 1
    fi
    sleep 0.1
  done
}

metric() { # node name  (the first sample of the metric on that node)
  "$bin" --host "127.$block.0.$1:7100" metrics | awk -v m="$2" 'index($0, m) == 1 { print $NF; exit }'
}

cpu_seconds() { # pid: user + system CPU so far
  awk -v t="$tck" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$1/stat"
}

mib() { python3 -c "print(f'{$1 / 1048576:.1f}')"; }

echo "binary $bin; loading $keys keys of 1 KiB into 3 nodes at ALL..."
for i in 1 2 3; do start_node "$i"; done
wait_un 3 120
"$bin" --host "$host" keyspace create ks --replication SimpleStrategy:3 >/dev/null
# Three files, one per coordinator, loaded at once.
python3 - "$work" "$keys" <<'EOF'
import sys
work, keys = sys.argv[1], int(sys.argv[2])
value = "v" * 1024
written = 0
files = [open(f"{work}/load{i}.txt", "w") for i in (1, 2, 3)]
for k in range(keys):
    key = f"key{k}"
    files[k % 3].write(f"put {key} {value}\n")
    written += len(key) + len(value)
for f in files:
    f.close()
open(f"{work}/written", "w").write(str(written))
EOF
written=$(cat "$work/written")
start=$(date +%s.%N)
loaders=()
for i in 1 2 3; do
  "$bin" --host "127.$block.0.$i:7100" batch ks "$work/load$i.txt" --consistency ALL \
    --batch-size 500 >"$work/batch$i.out" 2>&1 &
  loaders+=($!)
done
for pid in "${loaders[@]}"; do wait "$pid" || { cat "$work"/batch*.out >&2; exit 1; }; done
printf 'loaded %s MiB of keys and values in %.1f s\n' "$(mib "$written")" \
  "$(echo "$(date +%s.%N) - $start" | bc)"

echo "space amplification (bytes per byte of keys and values written):"
for i in 1 2 3; do
  load=$(metric "$i" ringstore_storage_load_bytes)
  disk=$(metric "$i" ringstore_storage_disk_bytes)
  python3 -c "print(f'  node $i: Load {$load / 1048576:.1f} MiB = {$load / $written:.2f}x, disk {$disk / 1048576:.1f} MiB = {$disk / $written:.2f}x')"
done

sources_cpu_before=0
for i in 1 2 3; do sources_cpu_before=$(echo "$sources_cpu_before + $(cpu_seconds "${pids[$i]}")" | bc); done
start=$(date +%s.%N)
# The joiner logs its join's steps (info of ringstore_node::topology).
start_node 4 warn,ringstore_node::topology=info
[ -n "${BENCH_JOINER_PID_FILE:-}" ] && echo "${pids[4]}" >"$BENCH_JOINER_PID_FILE"
wait_un 4 900
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
joiner_cpu=$(cpu_seconds "${pids[4]}")
joiner_wrote=$(awk '$1 == "write_bytes:" { print $2 }' "/proc/${pids[4]}/io")
sources_cpu=0
for i in 1 2 3; do sources_cpu=$(echo "$sources_cpu + $(cpu_seconds "${pids[$i]}")" | bc); done
sources_cpu=$(echo "$sources_cpu - $sources_cpu_before" | bc)
received=$(metric 4 'ringstore_stream_bytes_total{direction="received"}')
joiner_load=$(metric 4 ringstore_storage_load_bytes)
joiner_disk=$(metric 4 ringstore_storage_disk_bytes)
python3 - "$work/4.log" <<EOF
import re, sys
from datetime import datetime, timezone
received, elapsed, written = $received, $elapsed, $written
print(f"join: {received / 1048576:.1f} MiB applied, 4 nodes UN after {elapsed:.1f} s: "
      f"{received / 1048576 / elapsed:.1f} MiB/s end to end")
def logged(step):  # when the joiner's log first shows step
    for line in open(sys.argv[1]):
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        if step in line:
            return datetime.fromisoformat(line.split()[0].rstrip("Z"))
took, streamed = logged("took tokens"), logged("streamed every gained range")
if took and streamed:
    phase = (streamed - took).total_seconds()
    print(f"streaming phase: {phase:.2f} s: {received / 1048576 / phase:.1f} MiB/s applied")
    started = datetime.fromtimestamp($start, timezone.utc).replace(tzinfo=None)
    before = (took - started).total_seconds()
    after = elapsed - (streamed - started).total_seconds()
    print(f"  before it {before:.2f} s (start, 1 s of quiet membership, ring_delay), "
          f"after it {after:.2f} s until status shows UN")
else:
    print("streaming phase: the joiner's log has no 'took tokens'/'streamed every gained range'")
print(f"CPU during the join: joiner {$joiner_cpu:.1f} s, the three sources {$sources_cpu:.1f} s")
share = written * 3 / 4
print(f"joiner: Load {$joiner_load / 1048576:.1f} MiB = {$joiner_load / share:.2f}x, "
      f"disk {$joiner_disk / 1048576:.1f} MiB = {$joiner_disk / share:.2f}x of its 3/4 share")
print(f"joiner wrote {$joiner_wrote / 1048576:.1f} MiB to its disk during the join: "
      f"{$joiner_wrote / received:.2f}x the bytes it applied")
EOF
# The joiner keeps what it received as runs and folds them into sled in
# the background once no stream is writing (storage's `runs`): how long
# after UN that took, and what the joiner then had spent and written.
pending=$(metric 4 ringstore_storage_runs_pending)
if [ -n "$pending" ]; then
  deadline=$(( $(date +%s) + 600 ))
  while [ "$(metric 4 ringstore_storage_runs_pending)" != "0" ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then echo "runs not folded after 600 s" >&2; break; fi
    sleep 0.1
  done
  folded=$(echo "$(date +%s.%N) - $start - $elapsed" | bc)
  python3 -c "print(f'runs folded into sled {$folded:.1f} s after UN ($pending runs at UN); joiner CPU {$(cpu_seconds "${pids[4]}")} s, '
      f'wrote {$(awk '$1 == "write_bytes:" { print $2 }' "/proc/${pids[4]}/io") / $received:.2f}x the bytes it applied, in all')"
fi
keep_logs
