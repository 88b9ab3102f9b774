# Sourced after scripts/gpu_setup.sh by the scripts that train many things at once on one lent
# GPU (scripts/gpu_heads_graph.sh, scripts/gpu_graph_relative.sh): each training in the
# background (`launch NAME COMMAND...`, its log in $W/logs, its wall time in
# $W/timings.jsonl), one wall-clock guard over all of them (`guard_wait`: stops every process
# RESERVE seconds before BUDGET; the same command on the same warm machine resumes them from
# their last checkpoints), and the packing (`progress_table`, `pack`: every run's json, jsonl,
# md, log and toml files, no checkpoint or snapshot, into $OUT/results.tar.gz).
pids=()
mkdir -p "$W/logs"
launch() {  # name, command or function...: in the background, its wall time stamped
  local name=$1; shift
  ( start=$(date +%s); "$@" > "$W/logs/$name.log" 2>&1
    echo "{\"stage\": \"$name\", \"rc\": $?, \"seconds\": $(( $(date +%s) - start ))}," >> "$W/timings.jsonl" ) &
  pids+=($!)
}
killtree() {  # a process and everything under it (the guard: timeout runs no shell function)
  local child
  for child in $(pgrep -P "$1"); do killtree "$child"; done
  kill -TERM "$1" 2>/dev/null
}
running() { local n=0 p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done; echo $n; }
guard_wait() {  # until every launched process ends or RESERVE seconds of BUDGET are left
  while [ "$(running)" -gt 0 ] && [ "$(left)" -gt "$RESERVE" ]; do
    sleep 15
    say "running: $(running) processes; $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null)"
  done
  if [ "$(running)" -gt 0 ]; then
    say "the guard: stopping $(running) processes (the same command resumes them)"
    local p c
    for p in "${pids[@]}"; do
      # the python processes under each launch (its subshell stays to stamp the time)
      for c in $(pgrep -P "$p"); do killtree "$c"; done
    done
  fi
  wait "${pids[@]}"
  say "training done"
  for f in "$W"/logs/*.log; do echo "== $(basename "$f")"; tail -n 4 "$f"; done
}
progress_table() {  # $OUT/progress.md: every run's last step, whether it finished, its lowest set
  python3 - "$W" "$OUT/progress.md" <<'PY'
import json, sys
from pathlib import Path
root, out = Path(sys.argv[1]), Path(sys.argv[2])
rows = ["| run | last step | finished | lowest set |", "| --- | --- | --- | --- |"]
for m in sorted(root.rglob("metrics.jsonl")):
    lines = m.read_text().splitlines()
    last = json.loads(lines[-1]) if lines else None
    low = f"{100 * min(last['acc'].values()):.1f}%" if last and last.get("acc") else "-"
    rows.append(f"| {m.parent.relative_to(root)} | {last['step'] if last else '-'} | "
                f"{(m.parent / 'summary.json').exists()} | {low} |")
out.write_text("\n".join(rows) + "\n")
print(f"{len(rows) - 2} runs: {sum('| True |' in r for r in rows)} finished")
PY
}
pack() {  # $OUT/results.tar.gz from $W (the timings and the progress table with it)
  say "packing"
  (echo "["; cat "$W/timings.jsonl" 2>/dev/null; echo "{\"stage\": \"total\", \"rc\": 0, \"seconds\": $(( $(date +%s) - T0 ))}]") > "$W/timings.json"
  cp "$OUT/progress.md" "$W/progress.md" 2>/dev/null
  (cd "$W" && find . -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.log' \
     -o -name '*.toml' \) ! -path '*/snapshots/*' ! -path '*/checkpoints/*' \
     ! -name 'timings.jsonl' -size -8M | tar czf "$OUT/results.tar.gz" -T -)
}
