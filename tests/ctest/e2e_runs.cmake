# The end-to-end runs (tests/e2e/, tests/store/, scripts/chaos/), by the tree's role
# (tests/ctest/axes.cmake). Each script varies the environment (a real Slurm, mpirun, sshd,
# network namespaces, etcd), not npu_run's code paths, which the integration suite runs under
# ASan and as Linux 3.10: so every script runs in the plain tree (this kernel, torch 1.13), and
# in the ASan tree only where a path differs in a way no integration case shows: the DDP run and
# the store's clients with torch 2.14 (torch-facing), the partition as Linux 3.10 (TCP_RTO_MAX_MS
# refused, only the session's resume on a new connection carries the job), the slowed host as a
# straggler (2.14's flight recorder). The DDP ones and the store's clients also run with 2.6
# (label torch2). Each needs root (or mpirun); skipped otherwise.
if(NPU_RUN_TEST_ROLE STREQUAL "asan")
  npu_run_e2e_run("PyTorch DDP across two network namespaces" netns_ddp.sh 300 netns-ddp 2.14 3.10)
  npu_run_e2e_run("a partition of 2/3 of the heartbeat timeout between two network namespaces"
                  netns_partition.sh 180 netns-partition 1.13 3.10)
  npu_run_store_run(2.14 3.10)
  npu_run_e2e_run("a host slowed mid-run named as a straggler across network namespaces"
                  netns_slow_node.sh 300 netns-slow 2.14 3.10 SERIAL ARGS straggler)
  npu_run_torch_chroot(2.14 sid "Debian unstable")
  return()
endif()
# PyTorch DDP on two hosts: two network namespaces on a veth pair.
npu_run_e2e_run("PyTorch DDP across two network namespaces" netns_ddp.sh 300 netns-ddp 1.13 this)
# A real Slurm (a controller and two slurmd on this machine) running the sbatch templates.
npu_run_e2e_run("Slurm jobs on a real two-node test cluster" slurm_e2e.sh 400 slurm 1.13 this)
# Hot spares: a node of a DDP job killed and cut off, its seat taken by the spare, which restores
# the lost node's ranks from the copy of their snapshots on node 0.
npu_run_e2e_run("a spare takes a lost node's seat in DDP across network namespaces"
                netns_spare_ddp.sh 300 netns-spare 1.13 this)
# The etcd rendezvous: the leader etcd elected is killed and cut off, another leads, DDP goes on;
# a spare takes the lost leader's seat; a leader cut from etcd alone steps down before the new
# leader's round starts.
npu_run_e2e_run("the etcd-elected leader lost, DDP goes on across network namespaces"
                netns_etcd_ddp.sh 300 netns-etcd 1.13 this)
foreach(variant IN ITEMS spare split)
  npu_run_e2e_run("the etcd-elected leader lost (${variant}), across network namespaces"
                  netns_etcd_ddp.sh 300 netns-etcd 1.13 this ARGS ${variant})
endforeach()
# Open MPI's mpirun starting two agents.
npu_run_e2e_run("mpirun -n 2 forms one two-node job" mpi_e2e.sh 300 mpirun 1.13 this)
# MindSpore's scheduler and the TF Adapter's chief on node 0, reached from node 1's namespace.
npu_run_e2e_run("MindSpore and TensorFlow contracts across two network namespaces"
                netns_frameworks.sh 240 netns-frameworks 1.13 this)
# A partition shorter than the heartbeat timeout, ridden out (as Linux 3.10: above).
npu_run_e2e_run("a partition of 2/3 of the heartbeat timeout between two network namespaces"
                netns_partition.sh 180 netns-partition 1.13 this)
# A whole job started from here over ssh: real OpenSSH servers in network namespaces (DDP on two
# hosts, a failing rank's code, SIGINT, SIGKILL, an unreachable host, a lost session, device
# filters, --ship-binary, --ssh-tree).
npu_run_e2e_run("--hosts starts a job on two ssh hosts in network namespaces" ssh_launch.sh 400
                ssh-hosts 1.13 this)
# The workers' store against real torch clients: torch's own store tests re-enacted by the
# workers, on one node and on two (the rendezvous port shared), with a restart that must see a
# fresh key space; node 0's store for every rank (agent), and through each node's proxy (tiered).
npu_run_store_run(1.13 this)
# A host of three slowed by a CPU quota, its agent and workers with it, named by the pre-flight
# probe before any worker starts (as a straggler mid-run: the ASan tree's, above). RUN_SERIAL:
# other tests' load would slow the healthy hosts as well.
npu_run_e2e_run("a slowed host named by the pre-flight probe across network namespaces"
                netns_slow_node.sh 300 netns-slow 1.13 this SERIAL ARGS preflight)
# etcd's own faults in scripts/chaos, a short fixed-seed round: a follower member and etcd's leader
# member killed and every member frozen past the lease, each once, during the join or the run;
# every run checked for exit codes, new leaders, re-forms and strays (docs/HARDENING.md). Not
# under ASan: the etcd client's and rendezvous' own cases run the same code paths there.
add_test(NAME "chaos: etcd's faults, one round of each with a fixed seed"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/chaos/chaos.py --npu-run
                 $<TARGET_FILE:npu_run> --faults etcd --runs 3 --seed 7 --each-in-turn)
set_tests_properties("chaos: etcd's faults, one round of each with a fixed seed"
                     PROPERTIES LABELS integration TIMEOUT 300
                                PASS_REGULAR_EXPRESSION "no broken promise")
if(NOT NPU_RUN_TEST_ROLE STREQUAL "plain")
  return()
endif()
# The plain tree's torch 2 runs (label torch2): the DDP ones and the store's clients with 2.6;
# the 2.14 chroot for the benchmark smokes that need it.
npu_run_torch_chroot(2.6 trixie "Debian 13")
npu_run_torch_chroot(2.14 sid "Debian unstable")
npu_run_e2e_run("PyTorch DDP across two network namespaces" netns_ddp.sh 300 netns-ddp 2.6 this)
npu_run_e2e_run("a spare takes a lost node's seat in DDP across network namespaces"
                netns_spare_ddp.sh 300 netns-spare 2.6 this)
npu_run_e2e_run("the etcd-elected leader lost, DDP goes on across network namespaces"
                netns_etcd_ddp.sh 300 netns-etcd 2.6 this)
npu_run_store_run(2.6 this)
