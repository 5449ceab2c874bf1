# The benchmarks' smoke runs (scripts/bench/): registered in the plain tree only.

# A benchmark's smoke run: its script with tiny sizes, passing when its table has the row PASS
# matches, so that the script never rots. Beside the other tests (a smoke asserts no figure, and
# each makes what it uses under names of its own); ALONE for those that start hundreds of
# connections at once, whose small listen backlog another test's load could make refuse one
# (RUN_SERIAL).
function(npu_run_bench_smoke name script)
  cmake_parse_arguments(PARSE_ARGV 2 smoke "ALONE" "TIMEOUT;PASS;SKIP;FIXTURES" "ARGS")
  set(test "bench smoke: ${name}")
  add_test(NAME "${test}"
           COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/bench/${script} ${smoke_ARGS})
  set_tests_properties("${test}" PROPERTIES LABELS bench TIMEOUT ${smoke_TIMEOUT}
                                            PASS_REGULAR_EXPRESSION "${smoke_PASS}")
  # The longest first on a fresh clone, which has no ctest cost data (as tests/ctest/axes.cmake).
  math(EXPR cost "${smoke_TIMEOUT} / 6")
  set_tests_properties("${test}" PROPERTIES COST ${cost})
  if(smoke_ALONE)
    set_tests_properties("${test}" PROPERTIES RUN_SERIAL TRUE)
  endif()
  if(smoke_SKIP)
    set_tests_properties("${test}" PROPERTIES SKIP_REGULAR_EXPRESSION "${smoke_SKIP}")
  endif()
  if(smoke_FIXTURES)
    set_tests_properties("${test}" PROPERTIES FIXTURES_REQUIRED ${smoke_FIXTURES})
  endif()
  # One that needs a torch 2 chroot runs with the plain tree's torch 2 runs (CI's portability
  # stage).
  if(smoke_FIXTURES MATCHES "^torch-2")
    set_tests_properties("${test}" PROPERTIES LABELS "bench;torch2")
  endif()
endfunction()

# Smoke run of the start-up benchmark (this build's binary and the for-loop only).
npu_run_bench_smoke("starting hosts over ssh against the ssh for-loops" ssh_start.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --hosts 4 --runs 1
  TIMEOUT 300 SKIP "^skipped"
  PASS "\\| 4 \\| npu_run --hosts \\(fan-out 32\\) \\| [0-9.]+ s")
npu_run_bench_smoke("start-up against the shell for-loop" startup.py
  ARGS --dynamic $<TARGET_FILE:npu_run> --runs 3
  TIMEOUT 60
  PASS "\\| npu_run dynamic \\| [0-9.]+ ms")

# Smoke runs of the single-node benchmark and the TCPStore anchor, so the scripts never rot.
npu_run_bench_smoke("single-node launch, idle cost and failure against torchrun" single_node.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --nproc 2 --runs 1 --idle-seconds 1 --idle-runs 1
       --anchors one
  TIMEOUT 180
  PASS "Supervision cost")
npu_run_bench_smoke("TCPStore barrier anchor" tcpstore_barrier.py
  ARGS --sizes 16 --runs 1
  TIMEOUT 120
  PASS "\\| 16 \\| [0-9.]+ s")

npu_run_bench_smoke("time to the first DDP step against torchrun" training_start.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --runs 1 --nproc 2 --anchors host
  TIMEOUT 180
  PASS "\\| npu_run \\| [0-9.]+ s")

npu_run_bench_smoke("figures and targets from docs/BENCHMARKS.md" plots.py
  ARGS ${PROJECT_SOURCE_DIR}/docs/BENCHMARKS.md ${CMAKE_CURRENT_BINARY_DIR}/bench_plots
  TIMEOUT 60
  PASS "launch.png")

# Smoke run of the node-order benchmark: 4 namespaces behind two bridges and a shaped spine, one
# tiny all_reduce each way (root; skipped otherwise).
set(gain "bench smoke: all_reduce bus bandwidth by node order across a shaped spine")
add_test(NAME "${gain}"
         COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/bench/topology_gain.sh $<TARGET_FILE:npu_run>
                 --nodes 4 --mb 1 --iters 1)
set_tests_properties("${gain}" PROPERTIES LABELS bench TIMEOUT 180
                                          SKIP_RETURN_CODE 77
                                          PASS_REGULAR_EXPRESSION "\\| 4 \\| \\| topology / host \\| \\*\\*[0-9.]+x")

# Smoke run of the pre-flight probe's cost (2 nodes, off and full, one run each: quick's probe is
# the integration cases' "preflight: ...", full's whole-group step is run here only).
npu_run_bench_smoke("the pre-flight probe's time to the first worker" preflight_time.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --sizes 2 --runs 1 --modes off,full
  TIMEOUT 180
  PASS "\\| 2 \\| [0-9.]+ s \\| - \\| - \\| [0-9.]+ s \\| [0-9.]+ s \\|")

# Smoke run of the false alarms' benchmark: its cases exist (each runs once in the suite itself).
npu_run_bench_smoke("false alarms of healthy jobs run again and again" false_alarms.py
  ARGS --integration-tests $<TARGET_FILE:integration_tests> --list
  TIMEOUT 60
  PASS "\\| stragglers: a healthy run at one-second windows names no straggler \\| 2.14 \\| 0 \\| listed")

# Smoke run of the spare take-over benchmark (2 nodes and a spare, one run, npu_run only).
npu_run_bench_smoke("a spare taking a lost node's seat" spare_takeover.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --sizes 2 --torchrun-sizes none --runs 1
  TIMEOUT 120
  PASS "\\| 2 \\+ 1 \\| npu_run \\| [0-9.]+ s")

# Smoke run of the etcd failover benchmark (a 3-member etcd, 2 agents, one run, npu_run only).
npu_run_bench_smoke("the etcd-elected leader lost" etcd_failover.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --sizes 2 --torchrun-sizes none --runs 1
  TIMEOUT 120
  PASS "\\| 2 \\| npu_run etcd \\(lease TTL 2 s\\) \\| [0-9.]+ s")

# Smoke run of the etcd scale benchmark (8 agents, short windows), so the script never rots.
npu_run_bench_smoke("etcd's load from idle agents" etcd_scale.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --agents 8 --window 2 --settle 0.5
  TIMEOUT 120
  PASS "of which lease renewals \\(LeaseKeepAlive\\) \\| [0-9.]+ \\| [0-9.]+ \\|")

# Smoke run of the multi-node benchmark (2 agents, one run), so the script never rots.
npu_run_bench_smoke("multi-node launch and failure against torchrun" multi_node.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --sizes 2 --runs 1 --straggle 2 --torch26 off
  TIMEOUT 180
  PASS "\\| npu_run \\| [0-9]+ ms")

# Smoke run of the health gate's benchmark (one node, one run, fast tools), so the script never
# rots.
npu_run_bench_smoke("the health gate's added latency" health_gate.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --sizes 1 --runs 1 --delays 0.01
  TIMEOUT 120
  PASS "\\| 10 ms \\| 1 \\| [0-9.]+ s")

# Smoke run of the workers' store benchmark at a tiny size, so the script and the load generator
# never rot.
npu_run_bench_smoke("workers' store at scale against torch's stores" store_scale.py ALONE
  ARGS --loadgen $<TARGET_FILE:npu_run_store_loadgen> --sizes 256 --kinds "torch 1.13,agent,tiered,floor"
  TIMEOUT 120
  PASS "\\| 256 \\| tiered \\| [0-9.]+ s.*\\| 256 \\| floor \\| [0-9.]+ s")

# Smoke run of the rendezvous scale benchmark at a tiny size, so the script never rots.
npu_run_bench_smoke("rendezvous scale" rendezvous_scale.py ALONE
  ARGS --npu-run $<TARGET_FILE:npu_run> --loadgen $<TARGET_FILE:npu_run_rdzv_loadgen> --sizes 64 --runs 1 --small-backlog 4
  TIMEOUT 120
  PASS "\\| 64 \\| 4 \\|.*\\| 0 \\|")

# Smoke run of the progress-beat benchmark, so the script and the module never rot.
npu_run_bench_smoke("progress beats' cost to the agent" beat_cost.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --workers 2 --rate 100 --seconds 1 --runs 1
  TIMEOUT 120
  PASS "\\| beating \\| [0-9.]+ % \\| [0-9]+ \\| [0-9]+ \\|")

# Smoke run of the automatic beats' cost per optimizer step (torch 1.13 only: a few hundred steps).
npu_run_bench_smoke("automatic progress beats' cost per step" auto_progress_cost.py
  ARGS --steps 200 --runs 1 --only-host
  TIMEOUT 120
  PASS "\\| 1.13 \\(Debian 12\\) \\| [0-9.]+ us \\| [0-9.]+ us \\|.*\\| [0-9.]+ us .*\\| 200 of 200 \\|")

# Smoke run of npu_run's defaults' cost on examples/train_ddp.py (torch 1.13: one short round).
npu_run_bench_smoke("npu_run's defaults' cost per step of examples/train_ddp.py" train_ddp_cost.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --steps 80 --runs 1 --only-host
  TIMEOUT 120
  PASS "\\| 1.13 \\(Debian 12\\) \\| both \\(npu_run's default\\) \\| [0-9,]+ us \\|")

# Smoke run of the time to a hang's culprit (torch 2.14: 2 ranks, one run each side).
npu_run_bench_smoke("a hang's culprit named, against torchrun 2.14" time_to_culprit.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --sizes 2 --runs 1
  TIMEOUT 240 SKIP "^skipped" FIXTURES torch-2.14
  PASS "\\| npu_run \\| 2 \\| 1 \\| [0-9.]+ s, [0-9.]+ s \\| 1 of 1 \\|.*\\| torchrun 2.14 \\| 2 \\|")

# Smoke run of the flight recorder's cost per step (torch 2.14: a few steps, one buffer size).
npu_run_bench_smoke("the flight recorder's cost per step" recorder_cost.py
  ARGS --steps 50 --runs 1 --sizes 200
  TIMEOUT 180 SKIP "^skipped" FIXTURES torch-2.14
  PASS "\\| 200 \\| [0-9.]+ us \\| [0-9.]+-[0-9.]+ us \\| [-+][0-9.]+ % \\|")

# Smoke run of the recording's cost (2 workers, one short run, a report of the synthetic job).
npu_run_bench_smoke("what the timeline, the report and metrics cost" record_cost.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --workers 2 --rate 100 --seconds 1 --runs 1 --nodes 64
  TIMEOUT 180
  PASS "\\| beating, metrics scraped 10/s, report written \\([0-9]+ scrapes\\) \\| [0-9.]+ %.*\\| [0-9.]+ MB \\| [0-9.]+ MB \\| [0-9.]+ s \\|")

# Smoke run of the snapshots' cost (torch 1.13, 10 MB, one save of each kind), so the script and
# the module's restore path never rot.
# Goodput under faults (torch 1.13 here; the benchmark's figures are 2.14's): a few seconds each.
npu_run_bench_smoke("goodput under faults: snapshots in memory against torchrun's torch.save"
  goodput.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --torch 1.13 --duration 7 --fault-every 3 --state-mb 5
       --ideal-seconds 2
  TIMEOUT 180
  PASS "\\| npu_run, npu_run_checkpoint in memory \\| [0-9]+ steps \\| [0-9.]+ s \\| [1-9]")
npu_run_bench_smoke("a checkpoint's cost: snapshots in memory against torch.save" snapshot_cost.py
  ARGS --npu-run $<TARGET_FILE:npu_run> --sizes 10 --repeats 1
  TIMEOUT 120
  PASS "\\| \\*\\*200 MB/s shared FS \\+ fsync / npu_run\\*\\* \\| \\*\\*[0-9.]+x\\*\\* \\|")
