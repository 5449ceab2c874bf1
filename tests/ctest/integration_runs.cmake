# The integration suite's runs, by the tree's role (tests/ctest/axes.cmake). The Catch tags that
# decide where a case runs (the table in docs/guide/development.md, "What runs where"):
#   [pytorch]         torch-facing: what it checks depends on what torch does (its store
#                     clients, its error files, its optimizer's hooks, its recorders): with 2.6
#                     and 2.14 too
#   [snapshots]       not with 2.6: the snapshots' torch side is 1.13's save format and 2.14's
#   [kernel-neutral]  not as Linux 3.10: npu_run's own user-space work (a page drawn, a metrics
#                     text served), which no system call of the filter touches
#   [serial]          alone: it compares CPU shares, which other tests' load would skew
#   [etcd-faults]     not under ASan: two minutes of jobs waiting out etcd's elections, whose
#                     code paths run under ASan in the etcd client's and rendezvous' own cases
if(NPU_RUN_TEST_ROLE STREQUAL "asan")
  npu_run_catch_run("~[pytorch]~[kernel-neutral]~[serial]~[etcd-faults]" 1.13 3.10)
  npu_run_catch_run("[kernel-neutral]~[pytorch]~[serial]~[etcd-faults]" 1.13 this)
  npu_run_catch_run("[pytorch]~[kernel-neutral]~[serial]" 2.14 3.10)
  npu_run_catch_run("[serial]~[pytorch]" 1.13 3.10 SERIAL)
  npu_run_catch_run("[serial][pytorch]" 2.14 3.10 SERIAL)
else()
  npu_run_catch_run("~[serial]" 1.13 this)
  npu_run_catch_run("[serial]" 1.13 this SERIAL)
  if(NPU_RUN_TEST_ROLE STREQUAL "plain")
    npu_run_catch_run("[pytorch]~[snapshots]~[serial]" 2.6 this)
  endif()
endif()
