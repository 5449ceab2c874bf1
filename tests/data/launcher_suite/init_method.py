"""init_process_group through --init_method (tcp:// or env://), then an all-reduce of one-hot
vectors whose sum must be the world size."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--init_method", required=True)
args = parser.parse_args()
dist.init_process_group("gloo", init_method=args.init_method,
                        world_size=int(os.environ["WORLD_SIZE"]), rank=int(os.environ["RANK"]))
world = dist.get_world_size()
ones = F.one_hot(torch.tensor(dist.get_rank()), num_classes=world)
dist.all_reduce(ones)
if ones.sum().item() != world:
    raise RuntimeError(f"all-reduce gave {ones.tolist()} for a world of {world}")
print(f"Done {dist.get_rank()}", flush=True)
