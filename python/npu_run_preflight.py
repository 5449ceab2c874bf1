# npu_run's pre-flight probe (--preflight): one node's part of one step, run by its agent before a
# round forms, with the python and torch its workers use. The agent passes the step as JSON in
# argv[1] and reads one JSON line from stdout: the devices' matmul time (the slowest device's)
# and the all_gather's with the other nodes of the group, per repeat, in microseconds; or the
# error. The agent bounds it in time and kills it past the bound. The rendezvous judges the
# figures of every node (rendezvous/state/preflight_pairs.hpp).
import json
import os
import sys
import time


def _backend(torch):
    """The job's backend and the devices to time: NPUs (torch_npu, hccl), GPUs (nccl), or the
    CPU (gloo)."""
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)

        if torch.npu.is_available():
            return "hccl", [torch.device("npu", i) for i in range(torch.npu.device_count())]
    except ImportError:
        pass
    if torch.cuda.is_available():
        return "nccl", [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    return "gloo", [torch.device("cpu")]


def _synchronize(torch, device):
    if device.type == "npu":
        torch.npu.synchronize(device)
    elif device.type == "cuda":
        torch.cuda.synchronize(device)


def _typical(repeats, run, device, torch):
    """The median of `repeats` timed runs: a moment's contention passes, while a slow device, a
    slow link or a throttled CPU (each run spans its quota's period) is slow every time."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        _synchronize(torch, device)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def _matmul_seconds(torch, devices, full):
    """The slowest device's best time for a square matmul, after one untimed."""
    n = 512 if not full else 1024
    slowest = 0.0
    for device in devices:
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        torch.matmul(a, b)
        _synchronize(torch, device)
        took = _typical(5, lambda: torch.matmul(a, b), device, torch)
        slowest = max(slowest, took)
    return slowest


def _store(spec, dist, timeout):
    """Where the nodes meet: the job's store, or torch's own store on the group's first node
    (--worker-store torch)."""
    from datetime import timedelta

    host = spec["host_store"] and spec["rank"] == 0
    return dist.TCPStore(
        spec["store_addr"],
        spec["store_port"],
        spec["size"],
        host,
        timedelta(seconds=timeout),
    )


def _all_ready(store, spec, phase, timeout):
    """Every node asked in this step reached `phase` before any times it: where nodes share
    cores (one test machine) none measures alone while the others import torch or compute, and
    on a cluster it costs a round trip. The last to arrive sets the key the others wait on; one
    that never comes costs the others `timeout`, then they time anyway."""
    from datetime import timedelta

    key = spec["sync_key"] + "/" + phase
    if store.add(key, 1) >= spec["sync_nodes"]:
        store.set(key + "/go", "1")
        return
    try:
        store.wait([key + "/go"], timedelta(seconds=timeout))
    except RuntimeError:  # torch's store timeout: a node that is slower still, or gone
        pass


def _gather_seconds(torch, dist, backend, device, spec, store, timeout):
    """The all_gather of the group, per repeat, after one untimed (which sets up the links)."""
    from datetime import timedelta

    dist.init_process_group(
        backend,
        store=dist.PrefixStore("npu_run_preflight/" + spec["group"], store),
        rank=spec["rank"],
        world_size=spec["size"],
        timeout=timedelta(seconds=timeout),
    )
    try:
        elements = (1 << 20) if not spec["full"] else (1 << 22)
        if spec["step"] == 3:  # the whole group: about the pairs' volume in all, not per node
            elements = max(1 << 16, (1 << 23) // spec["size"])
        mine = torch.ones(elements, device=device)
        gathered = [torch.empty_like(mine) for _ in range(spec["size"])]
        dist.all_gather(gathered, mine)
        dist.barrier()
        _all_ready(store, spec, "gather", timeout / 4)
        return _typical(5, lambda: dist.all_gather(gathered, mine), device, torch)
    finally:
        dist.destroy_process_group()


def main():
    spec = json.loads(sys.argv[1])
    answer = {}
    try:
        import torch
        import torch.distributed as dist

        backend, devices = _backend(torch)
        if backend == "gloo":
            torch.set_num_threads(1)  # the same work on every node, whatever its core count
        answer["detail"] = "{} device(s), {}".format(len(devices), backend)
        timeout = max(1.0, spec["timeout_ms"] / 1000.0)
        store = _store(spec, dist, timeout)
        _all_ready(store, spec, "matmul", timeout / 4)
        if spec["matmul"]:
            answer["matmul_us"] = int(_matmul_seconds(torch, devices, spec["full"]) * 1e6)
        if spec["size"] > 1:
            seconds = _gather_seconds(torch, dist, backend, devices[0], spec, store, timeout)
            answer["gather_us"] = max(1, int(seconds * 1e6))
    except Exception as error:  # every failure is an answer: the rendezvous names the node
        first_line = (str(error).splitlines() or [""])[0]
        answer["error"] = "{}: {}".format(type(error).__name__, first_line)
    if "error" in answer:
        answer.pop("detail", None)
    print(json.dumps(answer), flush=True)
    # Threads torch left (gloo's) must not keep the answer from ending the process.
    os._exit(0)


if __name__ == "__main__":
    main()
