# Shared by the fake npu-smi, hccn_tool and nvidia-smi: reads the scenario file named by
# $NPU_RUN_FAKE_SCENARIO (one fact per line, '#' comments; see README.md beside this file) into
# shell variables, and applies the delays, hangs and "busy" answers it asks for.
# Sourced, never run. Bash only: a fake is called dozens of times per check.

declare -A fake_link fake_health fake_codes fake_process fake_netlth fake_noip fake_ipv6 fake_tls \
  fake_nocert fake_optical fake_flap fake_ping fake_hang fake_ecc fake_remap fake_gpu_process
fake_devices="0 1 2 3 4 5 6 7"
fake_delay=0
fake_tls_all=0
fake_a3=0
fake_style=narrow
fake_busy_once=0
fake_log_calls=0
fake_ip_base=10.0.0
fake_superpod=
fake_server_index=
fake_switch=
fake_chassis=

# Whether PID runs: a zombie has let go of its devices already.
fake_alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

if [[ -n ${NPU_RUN_FAKE_SCENARIO:-} && -r $NPU_RUN_FAKE_SCENARIO ]]; then
  while read -r key a b rest; do
    case $key in
      ''|'#'*) ;;
      devices) fake_devices="${a//,/ } $b $rest" ;;
      delay) fake_delay=$a ;;
      style) fake_style=$a ;;
      a3) fake_a3=1 ;;
      busy_once) fake_busy_once=1 ;;
      log_calls) fake_log_calls=1 ;;
      ip_base) fake_ip_base=$a ;;
      superpod) fake_superpod=$a; fake_server_index=$b ;;
      switch) fake_switch=$a ;;
      chassis) fake_chassis=$a ;;
      link_down) fake_link[$a]=DOWN ;;
      net_health) fake_netlth[$a]="$b${rest:+ $rest}" ;;
      no_ip) fake_noip[$a]=1 ;;
      ipv6) fake_ipv6[$a]=1 ;;
      tls_all) fake_tls_all=$a ;;
      tls) fake_tls[$a]=$b ;;
      no_cert) fake_nocert[$a]=1 ;;
      health) fake_health[$a]=$b; fake_codes[$a]=$rest ;;
      process) fake_process[$a]="$b $rest" ;;
      holder) if fake_alive "$b"; then fake_process[$a]="$b $rest"; fi ;;
      optical) fake_optical[$a]=$b ;;
      link_flap) fake_flap[$a]=$b ;;
      ping_fail) fake_ping[$a]=$b ;;
      hang) fake_hang[$a]=1 ;;
      ecc) fake_ecc[$a]=$b ;;
      remap) fake_remap[$a]=$b ;;
      gpu_process) fake_gpu_process[$a]="$b $rest" ;;
    esac
  done <"$NPU_RUN_FAKE_SCENARIO"
fi

# "hang npu-smi", "hang hccn_tool:-link" or "hang hccn_tool:-link:5": sleep as the real tool does
# while it retries a device that is not ready (the caller's timeout must end it).
fake_maybe_hang() {  # TOOL COMMAND DEVICE
  local key
  for key in "$1" "$1:$2" "$1:$2:$3"; do
    if [[ -n ${fake_hang[$key]:-} ]]; then exec sleep 600; fi
  done
}

# The first call of the scenario (across every tool call of the node) answers busy, exit 11.
fake_maybe_busy() {
  [[ $fake_busy_once == 1 ]] || return 0
  local marker="$NPU_RUN_FAKE_SCENARIO.busy-answered"
  if [[ ! -e $marker ]]; then
    : >"$marker"
    echo "hccn_tool is busy, please try again."
    exit 11
  fi
}

# A device answers "busy" to a command while another one runs on it: the real tool passes on
# the device's own reply (hicann/driver, dsmi/ds_net.c). Calls to other devices, or from another
# node's agent (another parent process), go side by side. Each such refusal is also written to
# SCENARIO.collisions, so a test can prove its runner never asks one device twice at once.
# Only with a scenario file: the locks live beside it.
fake_hold_device() {  # DEVICE COMMAND
  [[ -n ${NPU_RUN_FAKE_SCENARIO:-} ]] || return 0
  exec {fake_lock_fd}>>"$NPU_RUN_FAKE_SCENARIO.lock.$PPID.$1" || return 0
  if ! flock -n "$fake_lock_fd"; then
    echo "$PPID $1 $2" >>"$NPU_RUN_FAKE_SCENARIO.collisions"
    echo "hccn_tool is busy, please try again."
    exit 11
  fi
}

# `log_calls`: every call appends "START PARENT TOOL DEVICE COMMAND" to SCENARIO.started as it
# starts and "START END PARENT TOOL DEVICE COMMAND" (epoch seconds) to SCENARIO.calls when it
# ends, so a test can see which calls overlapped, and which were killed (started, never ended).
fake_log_call() {  # TOOL DEVICE COMMAND
  [[ $fake_log_calls == 1 ]] || return 0
  fake_call="$EPOCHREALTIME $PPID $1 ${2:--} $3"
  echo "$fake_call" >>"$NPU_RUN_FAKE_SCENARIO.started"
  trap 'echo "${fake_call%% *} $EPOCHREALTIME ${fake_call#* }" >>"$NPU_RUN_FAKE_SCENARIO.calls"' EXIT
}

# The sleep does not inherit a device lock: a call killed at its timeout lets go of the device.
fake_pause() {
  [[ $fake_delay == 0 ]] && return 0
  if [[ -n ${fake_lock_fd:-} ]]; then sleep "$fake_delay" {fake_lock_fd}>&-; else sleep "$fake_delay"; fi
}

# Column padding: the two styles differ in width, so no parser may depend on positions.
# Sets fake_width (no subshell: a fake is called hundreds of times per benchmark).
fake_pad() { if [[ $fake_style == wide ]]; then fake_width=31; else fake_width=26; fi; }
