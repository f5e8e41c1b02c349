"""A team's own training script, as it runs on SageMaker today: a strict argparse of its own
hyperparameters, its own torch.compile call, DDP when torchrun starts it. It knows nothing of
compiled-training."""

import argparse
import os

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--hidden", type=int, default=16)
args = parser.parse_args()  # strict: an argument it does not define stops it

distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
if distributed:
    dist.init_process_group("gloo")
rank = dist.get_rank() if distributed else 0
torch.manual_seed(0)

table = np.loadtxt(os.path.join(os.environ["SM_CHANNEL_TRAIN"], "iris.csv"), delimiter=",")
features = torch.tensor(table[:, :-1], dtype=torch.float32)
labels = torch.tensor(table[:, -1], dtype=torch.long)

model = torch.compile(nn.Sequential(nn.Linear(features.shape[1], args.hidden), nn.ReLU(),
                                    nn.Linear(args.hidden, 3)))
if distributed:
    model = nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
for epoch in range(args.epochs):
    for start in range(0, len(features) - 15, 16):  # full batches only: one shape
        batch = slice(start, start + 16)
        loss = nn.functional.cross_entropy(model(features[batch]), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")

if rank == 0:
    torch.save(model.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))
if distributed:
    dist.destroy_process_group()
