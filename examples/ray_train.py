"""RecordIO -> Ray Data -> PyTorch: train a small network on a ``.rec`` dataset with ranks fed by a Ray cluster.

    pip install 'mxrec[ray,image]' torch
    python examples/ray_train.py [--address HOST:PORT] [--rendezvous-host HOST] [--ranks 2] [--epochs 2] [DATASET]

1. Without DATASET, the bundled photos are packed on the cluster (``mxrec pack --engine ray``): a shard
   set ``photos_00000.rec`` ... with ``photos.manifest.json``, records identical to a local pack.
2. ``read_recordio`` makes it a Ray Dataset; its read tasks split the shards by ``.idx`` ranges.
3. ``TrainImages`` prepares samples on the cluster as ``mx.io.ImageRecordIter`` does (decode, MXNet's
   default augmentation -- here a random crop and mirror -- then mean/std into float32 CHW).
4. ``split_for_ranks`` gives each rank one stream of equal length; the ranks are Ray actors running
   ``torch.distributed`` (gloo) data parallelism, each reading its stream batch by batch while the
   cluster keeps preparing the next ones.

DATASET is anything ``read_recordio`` reads: a ``.rec`` (with its ``.idx``), a manifest, a glob, a folder.
Labels must be class ids below ``--classes``.

Nothing listens beyond 127.0.0.1 unless told: without ``--address`` mxrec starts a single-machine Ray on
loopback, and the ranks meet through a file in the work folder and exchange gradients over the loopback
interface. On a cluster of several machines pass ``--rendezvous-host`` (an address of the machine of rank 0
that the others reach) and a shared ``--workdir``: the ranks then meet over TCP there and gloo uses the
machines' network. That network, like a cluster at ``--address``, is yours to secure.
"""

from __future__ import annotations

import argparse
import socket
import tempfile
from pathlib import Path

import ray

import mxrec
import mxrec.ray as mray

PHOTOS = Path(__file__).resolve().parent.parent / "tests" / "data" / "golden" / "im2rec" / "photos200"
SHAPE = (3, 32, 32)
MEAN_STD = {"mean_r": 123.68, "mean_g": 116.28, "mean_b": 103.53, "std_r": 58.395, "std_g": 57.12, "std_b": 57.375}


def make_dataset(folder: Path) -> str:
    """Pack the bundled photos (one class per folder) on the cluster; return the shard set's manifest."""
    mxrec.make_lists(folder / "photos", PHOTOS, recursive=True)
    result = mray.pack_list_ray(folder / "photos.lst", PHOTOS, transform=mxrec.ImageTransform(resize=48))
    print(f"packed {result.records} photos into {len(result.outputs)} shards ({result.manifest})")
    return result.manifest


# Ranks use no CPU of their own here, so that the cluster's CPUs stay free for the data preparation
# (a real job would ask for a GPU each: @ray.remote(num_gpus=1)).
@ray.remote(num_cpus=0)
class Rank:
    """One rank of a data-parallel job: a replica of the model, trained on its own stream of batches."""

    def __init__(self, rank: int, ranks: int, classes: int) -> None:
        import torch

        torch.manual_seed(0)  # the same initial weights on every rank
        torch.set_num_threads(1)
        self.rank, self.ranks = rank, ranks
        self.model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(), torch.nn.Linear(32, classes))

    def endpoint(self, host: str) -> str:
        """Where rank 0 offers the process group's rendezvous over TCP: ``host`` and a free port there."""
        with socket.socket() as sock:
            sock.bind((host, 0))
            return f"tcp://{host}:{sock.getsockname()[1]}"

    def join(self, init_method: str, env: dict[str, str]) -> None:
        import os

        import torch
        import torch.distributed as dist

        os.environ.update(env)  # before the process group: gloo reads GLOO_SOCKET_IFNAME when it starts
        dist.init_process_group("gloo", init_method=init_method, rank=self.rank, world_size=self.ranks)
        self.model = torch.nn.parallel.DistributedDataParallel(self.model)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)

    def train_epoch(self, stream: ray.data.DataIterator, batch_size: int) -> tuple[float, int, int]:
        """One pass over this rank's stream: ``(summed loss, correct, samples)``."""
        import torch

        total_loss, correct, samples = 0.0, 0, 0
        for batch in stream.iter_torch_batches(batch_size=batch_size):
            labels = batch["label"].long()
            logits = self.model(batch["image"])
            loss = torch.nn.functional.cross_entropy(logits, labels)
            self.optimizer.zero_grad()
            loss.backward()  # gradients averaged over the ranks
            self.optimizer.step()
            total_loss += float(loss) * len(labels)
            correct += int((logits.argmax(1) == labels).sum())
            samples += len(labels)
        return total_loss, correct, samples

    def leave(self) -> None:
        import torch.distributed as dist

        dist.destroy_process_group()


def loopback_interface() -> str:
    """The name of the loopback network interface (``lo`` on Linux)."""
    names = [name for _, name in socket.if_nameindex()]
    return next((name for name in names if name.startswith("lo")), "lo")


def rendezvous(folder: Path, host: str | None) -> tuple[str | None, dict[str, str]]:
    """How the ranks meet: ``(init_method, environment)``; ``init_method`` None: ask rank 0 for a TCP one.

    Without ``host``: a file in ``folder`` (no listening socket) and gloo on the loopback interface, so
    nothing is reachable from another machine (PyTorch's TCP rendezvous would listen on every interface).
    """
    if host is None:
        store = folder / "rendezvous"
        store.unlink(missing_ok=True)  # a FileStore starts from an absent or empty file
        return store.resolve().as_uri(), {"GLOO_SOCKET_IFNAME": loopback_interface()}
    return None, {}


def train(dataset: str, *, ranks: int, epochs: int, batch_size: int, classes: int, workdir: Path,
          rendezvous_host: str | None = None) -> list[tuple[float, float]]:
    """Train for ``epochs``; return ``(mean loss, accuracy)`` per epoch over all ranks."""
    ds = mray.read_recordio(dataset).map_batches(
        mray.TrainImages(SHAPE, rand_crop=True, rand_mirror=True, **MEAN_STD), batch_format="pyarrow")
    streams = mray.split_for_ranks(ds, ranks)  # equal streams: every rank takes the same number of steps
    workers = [Rank.remote(rank, ranks, classes) for rank in range(ranks)]
    init_method, env = rendezvous(workdir, rendezvous_host)
    if init_method is None:
        init_method = ray.get(workers[0].endpoint.remote(rendezvous_host))
    ray.get([w.join.remote(init_method, env) for w in workers])
    history = []
    for epoch in range(epochs):
        results = ray.get([w.train_epoch.remote(s, batch_size) for w, s in zip(workers, streams, strict=True)])
        loss = sum(r[0] for r in results) / max(1, sum(r[2] for r in results))
        accuracy = sum(r[1] for r in results) / max(1, sum(r[2] for r in results))
        print(f"epoch {epoch}: loss {loss:.3f}, accuracy {accuracy:.2f} over {sum(r[2] for r in results)} "
              f"samples on {ranks} ranks")
        history.append((loss, accuracy))
    ray.get([w.leave.remote() for w in workers])
    return history


def main(argv: list[str] | None = None) -> list[tuple[float, float]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", nargs="?", help="a .rec, manifest, glob or folder (default: pack the photos)")
    parser.add_argument("--address", help="the Ray cluster (default: RAY_ADDRESS, else a local Ray on 127.0.0.1)")
    parser.add_argument("--rendezvous-host", help="an address of rank 0's machine where the ranks meet over TCP "
                                                  "(several machines; default: a file, and loopback only)")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--workdir", help="where to pack the photos: a folder every node sees (default: a "
                                          "temporary folder, which only a single-machine cluster sees)")
    args = parser.parse_args(argv)
    with mray.ray_session(args.address), tempfile.TemporaryDirectory(prefix="mxrec-ray-train-") as tmp:
        workdir = Path(args.workdir or tmp)
        dataset = args.dataset or make_dataset(workdir)
        return train(dataset, ranks=args.ranks, epochs=args.epochs, batch_size=args.batch_size,
                     classes=args.classes, workdir=workdir, rendezvous_host=args.rendezvous_host)


if __name__ == "__main__":
    main()
