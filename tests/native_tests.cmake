# The tests that need this machine's own architecture: the real npu_run binary started as a
# subprocess (integration), behind the old-kernel wrapper, end to end with PyTorch, Slurm and
# Open MPI, and the benchmark smokes. Included by tests/CMakeLists.txt unless cross-building.

# Integration and end-to-end tests: the real npu_run binary, real worker processes, real PyTorch.
file(GLOB integration_sources CONFIGURE_DEPENDS integration/*.cpp)
add_executable(integration_tests ${integration_sources} support/fixtures.cpp support/harness.cpp
                                 support/nodes.cpp support/output_pipes.cpp
                                 support/private_mounts.cpp support/process_census.cpp
                                 support/temp_dir.cpp)
target_include_directories(integration_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(integration_tests PRIVATE NPU_RUN_BINARY="$<TARGET_FILE:npu_run>"
                                                     NPU_RUN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
target_link_libraries(integration_tests PRIVATE npu_run_all npu_run_test_main npu_run_warnings)
add_dependencies(integration_tests npu_run)
catch_discover_tests(integration_tests TEST_PREFIX "integration: " EXTRA_ARGS --warn NoTests
                     PROPERTIES LABELS integration)

# Old kernels: as_old_kernel makes the system calls a kernel lacks fail with ENOSYS (seccomp), and
# npu_run-as-linux-3.10 is npu_run behind it, a drop-in for the binary (CentOS 7's kernel: no
# pidfd_open, clone3, close_range or getrandom). The whole integration suite, end-to-end tests
# included, runs a second time through it. Not under an emulator: qemu-user would apply the
# filter to its own, host-architecture system calls. Label integration-old-kernel: selected by
# `-L integration` and by `-L old-kernel` (labels are regular expressions).
add_executable(as_old_kernel tools/as_old_kernel.cpp)
target_link_libraries(as_old_kernel PRIVATE npu_run_warnings)
set(old_kernel_npu_run ${CMAKE_CURRENT_BINARY_DIR}/npu_run-as-linux-3.10)
file(GENERATE OUTPUT ${old_kernel_npu_run}
     CONTENT "#!/bin/sh\n# npu_run as on Linux 3.10: newer system calls fail with ENOSYS.\nexec '$<TARGET_FILE:as_old_kernel>' --linux 3.10 '$<TARGET_FILE:npu_run>' \"$@\"\n"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ
                      WORLD_EXECUTE)
add_dependencies(integration_tests as_old_kernel)
target_compile_definitions(integration_tests PRIVATE NPU_RUN_AS_OLD_KERNEL="$<TARGET_FILE:as_old_kernel>")
if(CMAKE_CROSSCOMPILING)
  set(NPU_RUN_OLD_KERNEL_SUITE OFF)
else()
  set(NPU_RUN_OLD_KERNEL_SUITE ON)
endif()
if(NPU_RUN_OLD_KERNEL_SUITE)
  # EXTRA_ARGS differ from the first discovery's (--name only names the run), so Catch's
  # generated test lists do not collide.
  catch_discover_tests(integration_tests TEST_PREFIX "linux 3.10: integration: "
                       EXTRA_ARGS --warn NoTests --name linux-3.10
                       PROPERTIES LABELS integration-old-kernel
                                  ENVIRONMENT "NPU_RUN_UNDER_TEST=${old_kernel_npu_run}")
endif()

# End to end, with the binary and behind the Linux 3.10 wrapper (need root / mpirun; skipped
# otherwise): across two network namespaces, a real Slurm (controller and two slurmd on this
# machine) running the sbatch templates, and Open MPI's mpirun starting two agents.
set(e2e_binaries "$<TARGET_FILE:npu_run>")
set(e2e_prefixes "e2e")
if(NPU_RUN_OLD_KERNEL_SUITE)
  list(APPEND e2e_binaries ${old_kernel_npu_run})
  list(APPEND e2e_prefixes "linux 3.10: e2e")
endif()
# Registers tests/e2e/SCRIPT as "<prefix>: TITLE" for each binary above. Each kind holds a
# machine-wide resource (namespace names, the test cluster's ports, mpirun's session): with
# ctest -j the runs of one kind must not overlap (LOCK).
function(npu_run_e2e_test title script timeout lock)
  foreach(binary prefix IN ZIP_LISTS e2e_binaries e2e_prefixes)
    set(labels "e2e;integration")
    if(NOT prefix STREQUAL "e2e")
      list(APPEND labels integration-old-kernel)
    endif()
    add_test(NAME "${prefix}: ${title}"
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/${script} ${binary} ${PROJECT_SOURCE_DIR})
    set_tests_properties("${prefix}: ${title}"
                         PROPERTIES SKIP_RETURN_CODE 77 LABELS "${labels}" TIMEOUT ${timeout}
                                    RESOURCE_LOCK ${lock})
  endforeach()
endfunction()
npu_run_e2e_test("PyTorch DDP across two network namespaces" netns_ddp.sh 300 netns)
npu_run_e2e_test("Slurm jobs on a real two-node test cluster" slurm_e2e.sh 400 slurm)
npu_run_e2e_test("mpirun -n 2 forms one two-node job" mpi_e2e.sh 300 mpirun)
# A partition shorter than the heartbeat timeout, ridden out; behind the old-kernel wrapper too,
# where TCP_RTO_MAX_MS is refused as before Linux 6.15 and only the session's resume on a new
# connection carries the job through.
npu_run_e2e_test("a partition of 2/3 of the heartbeat timeout between two network namespaces"
                 netns_partition.sh 180 netns-partition)
# A whole job started from here over ssh: real OpenSSH servers in network namespaces (DDP on two
# hosts, a failing rank's code, SIGINT, SIGKILL, an unreachable host, a lost session, device
# filters, --ship-binary, --ssh-tree). Behind the old-kernel wrapper the launcher's side runs as
# on Linux 3.10 (its ssh children reaped through SIGCHLD); the hosts' agents are started by sshd.
npu_run_e2e_test("--hosts starts a job on two ssh hosts in network namespaces" ssh_launch.sh 400
                 ssh-hosts)

# The workers' store against real torch 1.13 clients (2.6's below): torch's own store tests
# re-enacted by the workers, on one node and on two (the rendezvous port shared), with a restart
# that must see a fresh key space; node 0's store for every rank (agent), and each node's
# workers through their agent's proxy (tiered).
foreach(mode agent tiered)
  set(name "store: torch 1.13 clients in ${mode} mode, one node and two")
  add_test(NAME "${name}"
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/store/peer_suite.sh $<TARGET_FILE:npu_run>
                   ${PROJECT_SOURCE_DIR} ${mode})
  set_tests_properties("${name}" PROPERTIES LABELS integration TIMEOUT 400
                       ENVIRONMENT "PYTHON_EXEC=/usr/bin/python3"
                       PASS_REGULAR_EXPRESSION "peer suite: all passed in ${mode} mode \\(torch 1")
endforeach()

# torch 2.6 beside the host's 1.13: Debian 13's python3-torch in a chroot cached outside the
# checkout (tests/torch2/chroot.sh; made by the fixture test the first time, about 2 minutes and
# 1.6 GB), reached through tests/torch2/python as PYTHON_EXEC. The PyTorch tests (Catch tag
# [pytorch]) and the two-namespace DDP run again with it. One label, matched by -L integration,
# -L e2e and -L torch2 (labels are regular expressions).
set(torch2_python ${CMAKE_CURRENT_SOURCE_DIR}/torch2/python)
set(torch2_label integration-e2e-torch2)
add_test(NAME "torch 2.6: a Debian 13 chroot with python3-torch"
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/torch2/chroot.sh)
set_tests_properties("torch 2.6: a Debian 13 chroot with python3-torch"
                     PROPERTIES FIXTURES_SETUP torch2 LABELS ${torch2_label} TIMEOUT 1500
                                SKIP_RETURN_CODE 77)
catch_discover_tests(integration_tests TEST_SPEC "[pytorch]" TEST_PREFIX "torch 2.6: integration: "
                     EXTRA_ARGS --warn NoTests --name torch-2.6
                     PROPERTIES LABELS ${torch2_label} FIXTURES_REQUIRED torch2
                                ENVIRONMENT "PYTHON_EXEC=${torch2_python}"
                                SKIP_REGULAR_EXPRESSION "debootstrap needs root")
foreach(mode agent tiered)
  set(name "torch 2.6: store: torch 2.6 clients in ${mode} mode, one node and two")
  add_test(NAME "${name}"
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/store/peer_suite.sh $<TARGET_FILE:npu_run>
                   ${PROJECT_SOURCE_DIR} ${mode})
  set_tests_properties("${name}" PROPERTIES LABELS ${torch2_label} TIMEOUT 400
                       FIXTURES_REQUIRED torch2 ENVIRONMENT "PYTHON_EXEC=${torch2_python}"
                       PASS_REGULAR_EXPRESSION "peer suite: all passed in ${mode} mode \\(torch 2")
endforeach()
add_test(NAME "torch 2.6: e2e: PyTorch DDP across two network namespaces"
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/netns_ddp.sh $<TARGET_FILE:npu_run>
                 ${PROJECT_SOURCE_DIR})
set_tests_properties("torch 2.6: e2e: PyTorch DDP across two network namespaces"
                     PROPERTIES SKIP_RETURN_CODE 77 LABELS ${torch2_label} TIMEOUT 300
                                RESOURCE_LOCK netns FIXTURES_REQUIRED torch2
                                ENVIRONMENT "PYTHON_EXEC=${torch2_python}")

# The benchmark smokes run alone (RUN_SERIAL): they start hundreds of processes and
# connections at once, and a small listen backlog under another test's load could refuse one.
# Smoke run of the start-up benchmark (this build's binary and the for-loop only).
add_test(NAME "bench smoke: starting hosts over ssh against the ssh for-loops"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/bench/ssh_start.py
                 --npu-run $<TARGET_FILE:npu_run> --hosts 4 --runs 1)
set_tests_properties("bench smoke: starting hosts over ssh against the ssh for-loops"
                     PROPERTIES LABELS "bench" RUN_SERIAL TRUE TIMEOUT 300
                                SKIP_REGULAR_EXPRESSION "^skipped"
                                PASS_REGULAR_EXPRESSION "\\| 4 \\| npu_run --hosts \\(fan-out 32\\) \\| [0-9.]+ s")
add_test(NAME "bench smoke: start-up against the shell for-loop"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/bench/startup.py
                 --dynamic $<TARGET_FILE:npu_run> --runs 3)
set_tests_properties("bench smoke: start-up against the shell for-loop"
                     PROPERTIES LABELS "bench" RUN_SERIAL TRUE TIMEOUT 60 PASS_REGULAR_EXPRESSION "\\| npu_run dynamic \\| [0-9.]+ ms")

# Smoke runs of the single-node benchmark and the TCPStore anchor, so the scripts never rot.
add_test(NAME "bench smoke: single-node launch, idle cost and failure against torchrun"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/bench/single_node.py
                 --npu-run $<TARGET_FILE:npu_run> --nproc 2 --runs 1 --idle-seconds 1 --idle-runs 1)
set_tests_properties("bench smoke: single-node launch, idle cost and failure against torchrun"
                     PROPERTIES FIXTURES_REQUIRED torch2 LABELS "bench" RUN_SERIAL TRUE TIMEOUT 180 PASS_REGULAR_EXPRESSION "Supervision cost")
add_test(NAME "bench smoke: TCPStore barrier anchor"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/bench/tcpstore_barrier.py --sizes 16 --runs 1)
set_tests_properties("bench smoke: TCPStore barrier anchor"
                     PROPERTIES LABELS "bench" RUN_SERIAL TRUE TIMEOUT 120 PASS_REGULAR_EXPRESSION "\\| 16 \\| [0-9.]+ s")

add_test(NAME "bench smoke: time to the first DDP step against torchrun"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/bench/training_start.py
                 --npu-run $<TARGET_FILE:npu_run> --runs 1)
set_tests_properties("bench smoke: time to the first DDP step against torchrun"
                     PROPERTIES FIXTURES_REQUIRED torch2 LABELS "bench" RUN_SERIAL TRUE TIMEOUT 180 PASS_REGULAR_EXPRESSION "\\| npu_run \\| [0-9.]+ s")

add_test(NAME "bench smoke: figures and targets from docs/BENCHMARKS.md"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/bench/plots.py
                 ${PROJECT_SOURCE_DIR}/docs/BENCHMARKS.md ${CMAKE_CURRENT_BINARY_DIR}/bench_plots)
set_tests_properties("bench smoke: figures and targets from docs/BENCHMARKS.md"
                     PROPERTIES LABELS "bench" RUN_SERIAL TRUE TIMEOUT 60 PASS_REGULAR_EXPRESSION "launch.png")

# Smoke run of the multi-node benchmark (2 agents, one run), so the script never rots.
add_test(NAME "bench smoke: multi-node launch and failure against torchrun"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/bench/multi_node.py
                 --npu-run $<TARGET_FILE:npu_run> --sizes 2 --runs 1 --straggle 2 --torch26 off)
set_tests_properties("bench smoke: multi-node launch and failure against torchrun"
                     PROPERTIES LABELS "bench" RUN_SERIAL TRUE TIMEOUT 180 PASS_REGULAR_EXPRESSION "\\| npu_run \\| [0-9]+ ms")

# Smoke run of the workers' store benchmark at a tiny size, so the script and the load generator
# never rot.
add_test(NAME "bench smoke: workers' store at scale against torch's stores"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/bench/store_scale.py
                 --loadgen $<TARGET_FILE:npu_run_store_loadgen> --sizes 256 --kinds "torch 1.13,agent,tiered,floor")
set_tests_properties("bench smoke: workers' store at scale against torch's stores"
                     PROPERTIES LABELS "bench" RUN_SERIAL TRUE TIMEOUT 120
                                PASS_REGULAR_EXPRESSION "\\| 256 \\| tiered \\| [0-9.]+ s.*\\| 256 \\| floor \\| [0-9.]+ s")

# Smoke run of the rendezvous scale benchmark at a tiny size, so the script never rots.
add_test(NAME "bench smoke: rendezvous scale"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/bench/rendezvous_scale.py
                 --npu-run $<TARGET_FILE:npu_run> --loadgen $<TARGET_FILE:npu_run_rdzv_loadgen>
                 --sizes 64 --runs 1 --small-backlog 4)
set_tests_properties("bench smoke: rendezvous scale" PROPERTIES LABELS "bench" RUN_SERIAL TRUE TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "\\| 64 \\| 4 \\|.*\\| 0 \\|")

# Smoke run of the progress-beat benchmark, so the script and the module never rot.
add_test(NAME "bench smoke: progress beats' cost to the agent"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/bench/beat_cost.py
                 --npu-run $<TARGET_FILE:npu_run> --workers 2 --rate 100 --seconds 1 --runs 1)
set_tests_properties("bench smoke: progress beats' cost to the agent"
                     PROPERTIES LABELS "bench" RUN_SERIAL TRUE TIMEOUT 120
                                PASS_REGULAR_EXPRESSION "\\| beating \\| [0-9.]+ % \\| [0-9]+ \\| [0-9]+ \\|")
