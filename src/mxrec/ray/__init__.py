"""RecordIO on Ray Data: read, write, preprocess, pack and check datasets on a Ray cluster (``mxrec[ray]``).

* :mod:`~mxrec.ray.session`: connecting to a cluster (an unreachable address is an error naming it, not a
  hang), Ray Data quiet while mxrec reports progress, task errors unwrapped to mxrec's own.
* :mod:`~mxrec.ray.datasource`: :func:`read_recordio`, a Ray Data ``Datasource`` whose read tasks split the
  datasets by ``.idx`` ranges (one large ``.rec`` spreads over the cluster) and whose row counts come from
  the ``.idx`` or the manifest, without reading records.
* :mod:`~mxrec.ray.datasink`: :func:`write_recordio` and :class:`RecordSink`, a ``Datasink``: each write task
  writes its own shards under a staging folder; the job's shard set is committed by a manifest written last.
* :mod:`~mxrec.ray.preprocess`: mxrec's decode, re-encode and training transforms as ``map_batches``
  callables, and :func:`split_for_ranks` to feed the ranks of a training job.
* :mod:`~mxrec.ray.pack`: ``mxrec pack --engine ray`` (:func:`pack_list_ray`): records byte-identical to a
  local pack, written as a shard set.
* :mod:`~mxrec.ray.verify_tasks`: ``mxrec verify --engine ray`` (:func:`verify_dataset_ray`): the doctor's
  per-record facts gathered by Ray tasks, then the same checks as locally.

Read tasks fetch their piece of a file (a byte range of whole records) through :mod:`mxrec.storage`.
Importing this package without Ray installed raises a one-line :class:`~mxrec.errors.MissingExtraError` that
names the extra; everything else in mxrec works without Ray (the command line imports this lazily).
May import: :mod:`mxrec.errors`, :mod:`mxrec.format`, :mod:`mxrec.storage`, :mod:`mxrec.io`, :mod:`mxrec.datasets`,
:mod:`mxrec.image`, :mod:`mxrec.transforms`, :mod:`mxrec.packing`, :mod:`mxrec.doctor`, :mod:`mxrec.train`
(and Ray, pyarrow).
"""

from mxrec.ray.session import require_ray

require_ray()

from mxrec.ray.datasink import RecordSink, write_recordio  # noqa: E402
from mxrec.ray.datasource import RecordSource, read_recordio  # noqa: E402
from mxrec.ray.pack import pack_list_ray, pack_prefix_ray  # noqa: E402
from mxrec.ray.preprocess import DecodeImages, TrainImages, TransformImages, split_for_ranks  # noqa: E402
from mxrec.ray.session import ray_session  # noqa: E402
from mxrec.ray.verify_tasks import RayContentScan, verify_dataset_ray  # noqa: E402

__all__ = [
    "DecodeImages",
    "RayContentScan",
    "RecordSink",
    "RecordSource",
    "TrainImages",
    "TransformImages",
    "pack_list_ray",
    "pack_prefix_ray",
    "ray_session",
    "read_recordio",
    "split_for_ranks",
    "verify_dataset_ray",
    "write_recordio",
]
