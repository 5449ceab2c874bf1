"""Writes what torch.distributed.is_torchelastic_launched() says to --out_file."""
import argparse

import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--out_file", required=True)
args = parser.parse_args()
with open(args.out_file, "w") as out:
    out.write(str(dist.is_torchelastic_launched()))
