# Sourced by the benchmark scripts: what the block device under a directory
# did over a run, from its counters in /sys/block/DEV/stat.

# disk_device DIR: the name of the whole disk holding DIR (vda, not vda1).
disk_device() {
  local source
  source=$(df --output=source "$1" | tail -1)
  lsblk -no PKNAME "$source" 2>/dev/null | grep . || basename "$source"
}

# disk_stat DEV: the device's counters now, on one line (empty if missing).
disk_stat() { cat "/sys/block/$1/stat" 2>/dev/null || echo; }

# disk_rates DEV BEFORE AFTER SECONDS: writes per second, MB written per
# second and flushes per second between two disk_stat lines.
disk_rates() {
  python3 - "$@" <<'PY'
import sys
dev, before, after, elapsed = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), float(sys.argv[4])
if len(before) > 15 and len(after) > 15:
    d = [int(b) - int(a) for a, b in zip(before, after)]
    print(f"device {dev}: {d[4] / elapsed:.0f} writes/s, {d[6] * 512 / elapsed / 1e6:.1f} MB/s written, "
          f"{d[15] / elapsed:.0f} flushes/s")
else:
    print(f"device {dev}: no flush counts in /sys/block/{dev}/stat")
PY
}
