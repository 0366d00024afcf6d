#!/usr/bin/env bash
# A tmux session for following a looprl run's logs: window "logs" with four panes, following
#   Trainer       {output_dir}/logs/trainer.log
#   Orchestrator  {output_dir}/logs/orchestrator.log
#   Envs          {output_dir}/logs/envs/*/*/*.log (env_server.log and env_worker_{id}.log, train and eval;
#                 files that appear later are picked up)
#   Inference     {output_dir}/logs/inference.log
# Files that do not exist yet are waited for (tail -F), so the session can start before the run.
#
# Usage: scripts/tmux.sh -s SESSION -o OUTPUT_DIR [-d]
#   -s SESSION     tmux session name (default: looprl)
#   -o OUTPUT_DIR  the run directory (default: outputs)
#   -d             leave the session detached (for scripts); otherwise attach to it
set -euo pipefail

# Internal: follow every env log, restarting tail when the set of files changes.
if [[ "${1:-}" == "--follow-envs" ]]; then
  shopt -s nullglob
  envs_dir="$2"
  tail_pid=""
  current=""
  echo "following ${envs_dir}/*/*/*.log"
  while true; do
    files=("${envs_dir}"/*/*/*.log)
    listing="${files[*]:-}"
    if [[ "$listing" != "$current" ]]; then
      [[ -n "$tail_pid" ]] && kill "$tail_pid" 2>/dev/null || true
      current="$listing"
      if ((${#files[@]})); then
        tail -n 20 -F "${files[@]}" &
        tail_pid=$!
      fi
    fi
    sleep 2
  done
fi

session="looprl"
output_dir="outputs"
detach=0
usage() { sed -n '9,12p' "$0" | sed 's/^# \{0,1\}//'; }
while getopts "s:o:dh" opt; do
  case "$opt" in
    s) session="$OPTARG" ;;
    o) output_dir="$OPTARG" ;;
    d) detach=1 ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
command -v tmux >/dev/null || { echo "tmux.sh: tmux is not installed (apt-get install tmux)" >&2; exit 1; }
logs="$(cd "$(dirname "$output_dir")" && pwd)/$(basename "$output_dir")/logs"
script="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"

if tmux has-session -t "=$session" 2>/dev/null; then
  echo "tmux.sh: session '$session' already exists (attach: tmux attach -t $session)" >&2
  exit 1
fi

follow() { printf 'tail -n 50 -F %q' "$1"; }
envs="$(printf 'bash %q --follow-envs %q' "$script" "$logs/envs")"
# Panes in reading order (tiled: Trainer | Orchestrator over Envs | Inference).
pane=$(tmux new-session -d -P -F '#{pane_id}' -s "$session" -n logs -x 200 -y 50 "$(follow "$logs/trainer.log")")
tmux select-pane -t "$pane" -T Trainer
for title in Orchestrator Envs Inference; do
  case "$title" in
    Orchestrator) cmd="$(follow "$logs/orchestrator.log")" ;;
    Envs) cmd="$envs" ;;
    Inference) cmd="$(follow "$logs/inference.log")" ;;
  esac
  pane=$(tmux split-window -P -F '#{pane_id}' -t "$pane" "$cmd")
  tmux select-pane -t "$pane" -T "$title"
  tmux select-layout -t "$session:logs" tiled >/dev/null
done
tmux select-layout -t "$session:logs" tiled >/dev/null
tmux set-option -t "$session" pane-border-status top >/dev/null
tmux set-option -t "$session" pane-border-format " #{pane_title} " >/dev/null

if ((detach)); then
  echo "tmux session '$session' following $logs (attach: tmux attach -t $session)"
elif [[ -n "${TMUX:-}" ]]; then
  tmux switch-client -t "$session"
else
  tmux attach-session -t "$session"
fi
