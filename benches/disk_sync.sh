#!/usr/bin/env bash
# What the machine's disk does to a commit log, without ringstore (not run in
# CI): PROCS processes at once each write SIZE bytes into a preallocated 8 MiB
# file and fdatasync it, in a loop for SECONDS (as fast as they can, or RATE
# syncs per second each), the way three nodes' commit logs share one disk in
# the benchmarks. Then one process writes 512 MiB in 1 MiB writes and syncs
# once: the disk's sequential write rate, which bounds a bulk load that
# writes W bytes to disk per byte applied at rate/W.
# Prints per process: syncs per second, p50/p99/p99.9/max latency, and the
# syncs that took over 5 ms ("stalls"), with where in a 100 ms period each
# stall ended: stalls that all end at the same phase are a token bucket of
# the virtual disk refilling, not the guest's own I/O. Also the device's
# writes and flushes per second (/sys/block/DEV/stat) over the sync run.
# Usage: benches/disk_sync.sh [PROCS] [SIZE] [SECONDS] [RATE]
#        (defaults: 3 processes, 2000 bytes, 5 s, unpaced; RATE=0: unpaced)
# DIR=path writes the files there instead of a fresh temporary directory
# (it should be on the disk under test; the default is under /tmp).
set -euo pipefail
procs=${1:-3}
size=${2:-2000}
seconds=${3:-5}
rate=${4:-0}
dir=${DIR:-$(mktemp -d)}
trap 'rm -f "$dir"/disk_sync.*' EXIT
. "$(dirname "$0")/disk_stats.sh"
dev=$(disk_device "$dir")

before=$(disk_stat "$dev")
started=$(date +%s.%N)
for p in $(seq 1 "$procs"); do
  python3 - "$dir/disk_sync.$p" "$size" "$seconds" "$rate" "$p" <<'EOF' &
import os, sys, time
path, size, seconds, rate, name = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
segment = 8 << 20
fd = os.open(path, os.O_RDWR | os.O_CREAT)
os.pwrite(fd, b"\0" * segment, 0)
os.fsync(fd)
payload = b"x" * size
took, stall_phases = [], []
start = time.time()
end = start + seconds
i = 0
while time.time() < end:
    if rate > 0:
        due = start + i / rate
        if due > time.time():
            time.sleep(due - time.time())
    t = time.perf_counter()
    os.pwrite(fd, payload, (i * size) % (segment - size))
    os.fdatasync(fd)
    elapsed = time.perf_counter() - t
    took.append(elapsed)
    if elapsed > 0.005:
        stall_phases.append(int(time.time() * 1000) % 100)
    i += 1
took.sort()
n = len(took)
q = lambda f: took[min(n - 1, int(n * f))] * 1e6
phases = " ".join(str(p) for p in sorted(stall_phases)[:40])
print(f"process {name}: {n / seconds:.0f} syncs/s, p50 {q(0.5):.0f} us, p99 {q(0.99):.0f} us, "
      f"p99.9 {q(0.999):.0f} us, max {took[-1] * 1e6:.0f} us; {len(stall_phases)} stalls over 5 ms"
      + (f", ending at ms {phases} of a 100 ms period" if stall_phases else ""))
EOF
done
wait
after=$(disk_stat "$dev")
disk_rates "$dev" "$before" "$after" "$(echo "$(date +%s.%N) - $started" | bc)"
python3 - "$dir/disk_sync.seq" <<'EOF'
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC)
chunk = os.urandom(1 << 20)
t = time.perf_counter()
for i in range(512):
    os.pwrite(fd, chunk, i << 20)
os.fdatasync(fd)
elapsed = time.perf_counter() - t
print(f"sequential: 512 MiB written and synced in {elapsed:.2f} s: {512 / elapsed:.0f} MiB/s")
EOF
