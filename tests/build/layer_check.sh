#!/usr/bin/env bash
# The build knows its layers (cmake/layers.cmake): in a copy of the checkout, a file that
# includes a header of a layer its own layer did not declare fails to configure, naming the
# file and the include. Tried for a layer that exists today (store reaching into agent), for
# remote (a layer the hand-written list once left out) and for a layer added by the test itself,
# which no list names: the layer list must come from the npu_run_layer() calls; and for a layer
# in a folder of a folder (rendezvous/protocol reaching into rendezvous/state). The untouched
# copy configures, so each failure is the include's.
# usage: layer_check.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A fresh copy of the checkout as it is (tracked files, and new ones git does not ignore; a file
# deleted but not yet committed is skipped), configured without tests (they do not change the
# check).
fresh_copy() {
  rm -rf "$work/src" "$work/build"
  mkdir -p "$work/src"
  git -C "$src" ls-files -z --cached --others --exclude-standard |
    tar -C "$src" --ignore-failed-read --null -T - -cf - 2>/dev/null | tar -xf - -C "$work/src"
}
configure() {
  cmake -S "$work/src" -B "$work/build" -DNPU_RUN_BUILD_TESTS=OFF -DNPU_RUN_CCACHE=OFF \
    >"$work/out" 2>&1
}
expect_refusal() {  # what, the text the refusal must contain
  if configure; then
    echo "FAIL: $1 configured; expected a refusal" >&2
    exit 1
  fi
  # grep -c, not -q: under pipefail tr would die of SIGPIPE once grep -q stops reading.
  if [ "$(tr -s ' \n' ' ' <"$work/out" | grep -cF "$2")" = 0 ]; then
    echo "FAIL: $1 was refused, but not with '$2':" >&2
    cat "$work/out" >&2
    exit 1
  fi
  echo "ok: $1 refused: $2"
}

fresh_copy
configure || { echo "FAIL: the untouched copy does not configure:" >&2; cat "$work/out" >&2; exit 1; }
echo "ok: the untouched copy configures"

echo '#include "agent/local_agent.hpp"' >>"$work/src/launcher/store/wire.cpp"
expect_refusal "store including agent" \
  "launcher/store/wire.cpp: '#include \"agent/local_agent.hpp\"' reaches into the agent layer"

fresh_copy
echo '#include "remote/preamble.hpp"' >>"$work/src/launcher/agent/local_agent.hpp"
expect_refusal "agent including remote" \
  "launcher/agent/local_agent.hpp: '#include \"remote/preamble.hpp\"' reaches into the remote layer"

# A layer no list knows of, declared the way every layer is, and an older layer including it.
fresh_copy
mkdir "$work/src/launcher/probe"
printf 'int probe_answer() { return 42; }\n' >"$work/src/launcher/probe/answer.cpp"
printf 'int probe_answer();\n' >"$work/src/launcher/probe/answer.hpp"
printf 'npu_run_layer(probe USES basics SOURCES answer.cpp)\n' \
  >"$work/src/launcher/probe/CMakeLists.txt"
sed -i 's|^add_subdirectory(launcher/cli)|add_subdirectory(launcher/probe)\n&|' \
  "$work/src/CMakeLists.txt"
configure || { echo "FAIL: a new layer does not configure:" >&2; cat "$work/out" >&2; exit 1; }
echo "ok: a new layer configures"
echo '#include "probe/answer.hpp"' >>"$work/src/launcher/net/frames.cpp"
expect_refusal "net including the new layer" \
  "launcher/net/frames.cpp: '#include \"probe/answer.hpp\"' reaches into the probe layer"

# A layer may use only layers below it.
fresh_copy
sed -i 's|^  USES basics$|  USES basics agent|' "$work/src/launcher/cluster/CMakeLists.txt"
expect_refusal "cluster using agent" "the cluster layer uses 'agent', which is not a layer declared before it"
# A layer in a folder of a folder is named by both: the protocol may not reach up into the
# state machine beside it.
fresh_copy
echo '#include "rendezvous/state/state.hpp"' >>"$work/src/rendezvous/protocol/wire_parts.cpp"
expect_refusal "rendezvous/protocol including rendezvous/state" \
  "rendezvous/protocol/wire_parts.cpp: '#include \"rendezvous/state/state.hpp\"' reaches into the rendezvous/state layer"
echo "layer check: all passed"
