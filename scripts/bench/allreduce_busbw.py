"""One rank of the node-order benchmark (scripts/bench/topology_gain.sh): all_reduce of a
tensor of --mb megabytes over gloo, timed after a warm-up; rank 0 prints the bus bandwidth
(bytes x 2(n-1)/n per second, as nccl-tests count it) and the order the ranks sat in."""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--iters", type=int, default=3)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    tensor = torch.ones(int(args.mb * 1024 * 1024 / 4), dtype=torch.float32)
    hosts = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    dist.all_reduce(tensor)  # warm-up: connections made, buffers touched
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.iters):
        dist.all_reduce(tensor)
    seconds = (time.perf_counter() - start) / args.iters
    if dist.get_rank() == 0:
        size = tensor.numel() * 4
        busbw = size * 2 * (world - 1) / world / seconds
        print(f"busbw {busbw / 1e6:.2f} MB/s, {seconds:.3f} s per all_reduce of {size} bytes, "
              f"ranks on {' '.join(hosts)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
